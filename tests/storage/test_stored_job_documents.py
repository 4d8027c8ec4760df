"""Job documents as storage holds them today keep reading back, whatever the job model becomes.

The files in stored_jobs/ are the `Document` column of job entities written by the code of
commit 7916491: definitions sent through the API's model (`JobProperties`), saved with
`JobDocument.defined` and encoded by the codec the job tables use (then `JobDocument.to_wire`,
now `shared.storage.job_codec.encode_job`).
They cover HTTP with Basic, client certificate (a throwaway self-signed pfx) and OAuth
authentication, a StorageQueue errorAction, StorageQueue and Service Bus queue and topic actions,
Fixed, Exponential and no retries, calendar exclusions, a Free collection's job, a job that ran
(a claimed try, its last attempt, a reason for its state), one that completed, and one written
before the document kept its retries, region, counts and pending tries apart. Every secret in
them is a made-up string.

Issue 45 moves the job's definition from JSON to the typed model: these must still decode, and
encode again to what they were.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.domain.job_definition import FINAL_STATES, JobProperties, JobState
from shared.domain.job_document import JobDocument, Retries
from shared.storage.documents import as_json
from shared.storage.job_codec import decode_job, encode_job

STORED = Path(__file__).parent / "stored_jobs"
# Written before retries, region, counts and pending tries were kept in the document.
OLD = "old_without_newer_fields"
SECRETS = (
    "basic-secret",
    "pfx-pass",
    "oauth-secret",
    "sig=queue-secret",
    "sig=q2",
    "sb-secret",
    "sb-secret-2",
)


def stored(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((STORED / f"{name}.json").read_text())
    return loaded


def decoded(name: str) -> JobDocument:
    """The document as a job table reads it: from the string in its Document column."""
    return decode_job(json.loads(as_json(stored(name))))


NAMES = sorted(path.stem for path in STORED.glob("*.json"))
CURRENT = [name for name in NAMES if name != OLD]


def test_the_fixtures_are_there() -> None:
    assert len(CURRENT) >= 6 and OLD in NAMES


@pytest.mark.parametrize("name", CURRENT)
def test_a_stored_document_encodes_again_to_what_was_stored(name: str) -> None:
    document = decoded(name)
    assert encode_job(document) == stored(name)
    assert decode_job(encode_job(document)) == document


@pytest.mark.parametrize("name", NAMES)
def test_no_secret_of_a_stored_document_shows_on_a_read(name: str) -> None:
    document = decoded(name)
    shown = json.dumps(document.public_properties())
    assert all(secret not in shown for secret in SECRETS)
    action = stored(name)["definition"]["action"]
    pfx = action.get("request", {}).get("authentication", {}).get("pfx")
    assert pfx is None or pfx not in shown
    # What the client sent besides its secrets stays readable.
    assert json.loads(shown)["action"]["type"] == action["type"]


@pytest.mark.parametrize("name", NAMES)
def test_the_typed_definition_holds_everything_stored(name: str) -> None:
    """The typed model holds what is stored, secrets and certificate facts included, and the
    state the service set (Completed, Faulted), which the API's model refuses from a client."""
    definition = stored(name)["definition"]
    assert decoded(name).properties.to_wire() == definition
    if JobState(definition["state"]) in FINAL_STATES:
        with pytest.raises(ValueError, match="only enabled or disabled can be set"):
            JobProperties.model_validate(definition)


def test_a_job_that_ran_keeps_its_claim_its_counts_and_its_last_attempt() -> None:
    document = decoded("http_basic_retry_fixed")
    [pending] = document.pending
    assert pending.claim is not None and pending.claim.holder == "delivery-1"
    assert document.claimed_until == datetime(2026, 11, 28, 9, 1, tzinfo=UTC)
    assert (document.status.execution_count, document.status.failure_count) == (4, 1)
    assert (document.occurrences, document.history_count) == (4, 5)
    assert document.last_attempt is not None and document.last_attempt["status"] == "Failed"
    assert document.state_reason == "watched after an outage"
    assert document.retries == Retries(2, timedelta(minutes=1))


def test_the_policies_stored_come_back_with_their_defaults_applied() -> None:
    assert decoded("http_clientcert_exponential").retries.exponential
    assert decoded("http_oauth_error_action_queue").retries == Retries()
    # A Free collection's job waits at least an hour between tries.
    assert decoded("storage_queue_free").retries.interval == timedelta(hours=1)


def test_a_completed_job_reads_as_completed_with_when_it_ended() -> None:
    document = decoded("storage_queue_free")
    assert document.state is JobState.COMPLETED and document.final
    assert document.ended_at == datetime(2026, 11, 28, 11, 0, tzinfo=UTC)
    assert document.state_reason == "count reached"
    assert document.status.next_execution_time is None


def test_the_schedules_stored_read_as_schedules() -> None:
    weekly = decoded("service_bus_topic_exclusions").schedule
    first = weekly.first
    # Mondays and Fridays at 08:00, Wednesdays excluded anyway, from Monday 30 November.
    assert first == datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    assert decoded("service_bus_queue").schedule.first is not None  # runs once, at once


def test_a_document_written_before_the_newer_fields_reads_with_their_defaults() -> None:
    old, current = decoded(OLD), decoded("http_basic_retry_fixed")
    assert old.properties == current.properties
    # Retries derived from the policy spelled out in the definition, as a new save keeps them.
    assert old.retries == current.retries
    assert (old.pending, old.occurrences, old.history_count, old.region) == ((), 0, 0, "")
    assert old.last_attempt is None and old.state_reason is None
    # Encoded again, it has the newer fields and reads back the same.
    assert "retries" in encode_job(old)
    assert decode_job(encode_job(old)) == old
