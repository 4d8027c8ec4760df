"""The action performers behind one interface, looked up by the action's type."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from shared.actions import Actions, Performed
from shared.domain.attempts import Attempt
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_definition import ActionName, ActionType, ErrorAction, JobProperties

JOB = JobId(CollectionId("sub", "group", "jc"), "job")
AT = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


class Recording:
    """A performer that notes what it was asked to do."""

    def __init__(self, succeeds: bool = True) -> None:
        self.performed: list[tuple[str, str]] = []
        self.closed = 0
        self._succeeds = succeeds

    def perform(self, action: ErrorAction, job: JobId, attempt: Attempt, region: str = "") -> Performed:
        self.performed.append((action.type.value, region))
        return Performed(self._succeeds, f"performed {action.type.value}")

    def close(self) -> None:
        self.closed += 1


def test_each_type_goes_to_its_performer_and_an_error_action_to_the_error_actions() -> None:
    http, queue = Recording(), Recording(succeeds=False)
    actions = Actions(lambda: AT, {ActionType.HTTP: http, ActionType.STORAGE_QUEUE: queue})
    definition = JobProperties.model_validate({"action": {"type": "Http", "errorAction": {"type": "StorageQueue"}}})
    main = actions.perform(definition, JOB, Attempt(AT), region="westeurope")
    fallback = actions.perform(definition, JOB, Attempt(AT, action=ActionName.ERROR_ACTION))
    assert (main.succeeded, main.message) == (True, "performed Http")
    assert (fallback.succeeded, fallback.message) == (False, "performed StorageQueue")
    assert http.performed == [("Http", "westeurope")]
    assert queue.performed == [("StorageQueue", "")]


def test_a_type_without_a_performer_is_a_failed_attempt_not_another_types_call() -> None:
    service_bus = Recording()
    actions = Actions(lambda: AT, {ActionType.SERVICE_BUS_QUEUE: service_bus})
    outcome = actions.perform(JobProperties.model_validate({"action": {"type": "Http"}}), JOB, Attempt(AT))
    assert not outcome.succeeded
    assert outcome.message == "The action could not be performed: no performer for Http"
    assert service_bus.performed == []


def test_a_performer_of_several_types_is_closed_once() -> None:
    service_bus = Recording()
    actions = Actions(lambda: AT, {ActionType.SERVICE_BUS_QUEUE: service_bus, ActionType.SERVICE_BUS_TOPIC: service_bus})
    actions.close()
    assert service_bus.closed == 1


class Failing:
    """A performer with a fault of ours whose message quotes the job's URI, key and all."""

    def perform(self, action: ErrorAction, job: JobId, attempt: Attempt, region: str = "") -> Performed:
        assert action.request is not None
        raise ValueError(f"cannot send to {action.request.uri}")

    def close(self) -> None:
        pass


def test_a_fault_of_ours_is_a_failed_attempt_logged_with_the_uris_keys_masked(caplog: pytest.LogCaptureFixture) -> None:
    actions = Actions(lambda: AT, {ActionType.HTTP: Failing()})
    definition = {"action": {"type": "Http", "request": {"uri": "https://u:pw-1@h.example.org/run?code=key-2&x=1", "method": "GET"}}}
    with caplog.at_level(logging.ERROR, logger="scheduler.actions"):
        outcome = actions.perform(JobProperties.model_validate(definition), JOB, Attempt(AT))
    assert (outcome.succeeded, outcome.message) == (False, "The action could not be performed: internal error (ValueError)")
    [record] = caplog.records
    logged = record.getMessage()
    assert "ValueError: cannot send to https://u:***@h.example.org/run?code=***&x=1" in logged
    assert "Traceback" in logged and JOB.arm_name in logged
    assert "pw-1" not in logged and "key-2" not in logged


class Echoing:
    """A performer whose outcome, and whose fault, quote the secrets the action holds."""

    def __init__(self, fails: bool) -> None:
        self._fails = fails

    def perform(self, action: ErrorAction, job: JobId, attempt: Attempt, region: str = "") -> Performed:
        request = action.request
        assert request is not None and request.authentication is not None
        quoted = f"{request.headers} {request.authentication.password} {request.uri}"
        if self._fails:
            raise ValueError(f"cannot send {quoted}")
        return Performed(True, f"Body: {quoted}")


@pytest.mark.parametrize("fails", [False, True], ids=["in-the-outcome", "in-a-fault"])
def test_no_secret_the_job_holds_is_recorded_whatever_quotes_it(fails: bool, caplog: pytest.LogCaptureFixture) -> None:
    actions = Actions(lambda: AT, {ActionType.HTTP: Echoing(fails)})
    request = {"uri": "https://h.example.org/run?code=Key-1", "method": "POST", "headers": {"X-Api-Key": "Key-2", "X-Trace": "t-1"},
               "authentication": {"type": "Basic", "username": "u", "password": "Pass-3"}}  # fmt: skip
    with caplog.at_level(logging.ERROR, logger="scheduler.actions"):
        outcome = actions.perform(JobProperties.model_validate({"action": {"type": "Http", "request": request}}), JOB, Attempt(AT))
    recorded = outcome.message + caplog.text
    assert "Key-1" not in recorded and "Key-2" not in recorded and "Pass-3" not in recorded
    assert "t-1" in recorded
