"""The storage client's retry policy and error mapping, without a service: the pauses (exponential
with jitter, Retry-After honoured, bounded by the operation's deadline), which answers are tried
again, the errors chosen by the service's error code, proxy credentials, the client setting, and
the API's 503 when storage fails a request."""

from __future__ import annotations

import random
from typing import Any

import pytest
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceResponseError,
)

from shared.api.errors import StorageUnavailable, arm_error
from shared.settings import STORAGE_CLIENT, SettingError, Settings
from shared.storage.storage_http import (
    FIRST_PAUSE_S,
    Answer,
    AnswerLost,
    proxy_credentials,
    raise_for,
    retried,
    retry_pause,
)


def test_pauses_grow_exponentially_with_jitter() -> None:
    random.seed(43)
    for attempt in (1, 2, 3):
        step = FIRST_PAUSE_S * 4 ** (attempt - 1)
        pauses = {retry_pause(attempt, None, 60.0) for _ in range(50)}
        assert all(step / 2 <= pause <= step for pause in pauses)
        assert len(pauses) > 1  # jittered, not fixed


def test_retry_after_is_honoured_and_the_deadline_bounds_the_pause() -> None:
    assert retry_pause(1, {"Retry-After": "4"}, 60.0) >= 4
    assert retry_pause(1, {"x-ms-retry-after-ms": "1500"}, 60.0) >= 1.5
    assert retry_pause(1, {"Retry-After": "4"}, 0.5) == 0.5
    assert retry_pause(1, {"Retry-After": "Fri, 27 Nov 2026 10:00:00 GMT"}, 60.0) <= FIRST_PAUSE_S


@pytest.mark.parametrize(
    ("status", "repeatable", "expected"),
    [
        (503, False, True), (429, False, True), (408, False, True),
        (500, True, True), (500, False, False), (504, False, False), (502, True, True),
        (507, True, True), (505, True, False), (404, True, False), (412, True, False),
    ],
)  # fmt: skip
def test_which_answers_are_tried_again(status: int, repeatable: bool, expected: bool) -> None:
    assert retried(status, repeatable) is expected


def raised(answer: Answer) -> HttpResponseError:
    with pytest.raises(HttpResponseError) as error:
        raise_for(answer)
    return error.value


def json_error(code: str) -> bytes:
    return f'{{"odata.error":{{"code":"{code}","message":{{"value":"words"}}}}}}'.encode()


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (403, "AuthorizationFailure", HttpResponseError),
        (403, "AuthenticationFailed", ClientAuthenticationError),
        (401, "NoAuthenticationInformation", ClientAuthenticationError),
        (409, "EntityAlreadyExists", ResourceExistsError),
        (404, "ResourceNotFound", ResourceNotFoundError),
        (412, "UpdateConditionNotSatisfied", ResourceModifiedError),
        (400, "PopReceiptMismatch", HttpResponseError),
        (503, "ServerBusy", HttpResponseError),
    ],
)
def test_errors_are_chosen_by_the_service_code_with_the_answer_attached(
    status: int, code: str, kind: type[HttpResponseError]
) -> None:
    error = raised(Answer(status, {"x-ms-error-code": code}, json_error(code)))
    assert type(error) is kind
    assert (error.status_code, error.error_code) == (status, code)  # type: ignore[attr-defined]
    assert error.response is not None and error.response.status_code == status
    assert code in str(error)


def test_a_code_only_in_the_body_counts_too() -> None:
    error = raised(Answer(412, {}, json_error("UpdateConditionNotSatisfied")))
    assert type(error) is ResourceModifiedError


def test_proxy_credentials_go_in_a_proxy_authorization_header() -> None:
    assert proxy_credentials("http://user%40corp:p%3Ass@proxy:3128") == {
        "proxy-authorization": "Basic dXNlckBjb3JwOnA6c3M="
    }
    assert proxy_credentials("http://proxy:3128") == {}


def test_the_storage_client_setting_is_checked_at_start() -> None:
    assert Settings.from_environment({}).storage_client == "http"
    assert Settings.from_environment({STORAGE_CLIENT: "SDK"}).storage_client == "sdk"
    with pytest.raises(SettingError, match=STORAGE_CLIENT):
        Settings.from_environment({STORAGE_CLIENT: "azure"})


@pytest.mark.parametrize(
    "failure",
    [
        ServiceResponseError("connection dropped"),
        AnswerLost("500 OperationTimedOut"),
        HttpResponseError(message="ServerBusy"),
    ],
    ids=["no-answer", "answer-lost", "busy"],
)
def test_the_api_answers_503_with_retry_after_when_storage_fails(failure: Any) -> None:
    if type(failure) is HttpResponseError:
        failure.status_code = 503
    error = arm_error(failure)
    assert isinstance(error, StorageUnavailable)
    assert error.status == 503 and int(error.headers["Retry-After"]) > 0
    assert error.envelope["error"]["code"] == "ServiceUnavailable"


def test_a_storage_refusal_that_is_no_fault_of_storage_is_not_a_503() -> None:
    refused = HttpResponseError(message="OutOfRangeInput")
    refused.status_code = 400
    assert not isinstance(arm_error(refused), StorageUnavailable)
