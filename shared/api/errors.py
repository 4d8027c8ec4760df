"""The errors the API answers with, each knowing its ARM error code and HTTP status, and the one
place where the errors of the layers below become ARM errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

from shared.domain.access import Action, Caller, refusal_message
from shared.domain.ids import PROVIDER, CloudServiceId, CollectionId, JobId
from shared.domain.problems import FieldError, InvalidRequest, Refused, RuleBroken
from shared.domain.templates.deployment import TemplateError
from shared.storage.errors import (
    EtagMismatch,
    ModifiedConcurrently,
    NotFound,
    QuotaExceeded,
    StorageError,
)


class ErrorDetail(TypedDict):
    code: str
    target: str  # the JSON path of the field
    message: str


class TemplateViolation(TypedDict):
    resource: str
    property: str
    expression: str | None


class AdditionalInfo(TypedDict):
    type: str
    info: TemplateViolation


class ErrorBody(TypedDict):
    code: str
    message: str
    details: NotRequired[list[ErrorDetail]]
    additionalInfo: NotRequired[list[AdditionalInfo]]


class ErrorEnvelope(TypedDict):
    """ARM's error body: `{"error": {"code", "message", ...}}`."""

    error: ErrorBody


class ArmError(Exception):
    """An error with a place in the ARM error envelope `{"error": {"code", "message"}}`."""

    status = 500
    code = "InternalServerError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def envelope(self) -> ErrorEnvelope:
        return {"error": {"code": self.code, "message": self.message}}

    @property
    def headers(self) -> dict[str, str]:
        """Headers the answer carries beside the body."""
        return {}


# Seconds a client is asked to wait before trying again when storage failed a request.
STORAGE_RETRY_AFTER_S = 5


class StorageUnavailable(ArmError):
    """Storage failed the request (busy, timed out, unreachable) after the client's own retries:
    nothing the caller did wrong, and worth trying again later (a write answered so may or may
    not have been made: a GET says which)."""

    status = 503
    code = "ServiceUnavailable"

    def __init__(self) -> None:
        super().__init__(
            "The service's storage did not carry out the request in time; "
            f"try again in {STORAGE_RETRY_AFTER_S} seconds."
        )

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(STORAGE_RETRY_AFTER_S)}


class BadRequest(ArmError):
    status = 400
    code = "BadRequest"


class InvalidFields(BadRequest):
    """A body that breaks rules: the message lists them all, and ARM's error `details` name each
    one's field (`target`, a JSON path) so that a form can show each problem beside its field."""

    def __init__(self, message: str, errors: Sequence[FieldError]) -> None:
        super().__init__(message)
        self.errors = tuple(errors)

    @property
    def envelope(self) -> ErrorEnvelope:
        details: list[ErrorDetail] = [
            {"code": self.code, "target": error.field, "message": error.problem}
            for error in self.errors
        ]
        return {"error": {"code": self.code, "message": self.message, "details": details}}


class MissingApiVersion(ArmError):
    status = 400
    code = "MissingApiVersionParameter"

    def __init__(self, supported: Sequence[str]) -> None:
        super().__init__(
            "The api-version query parameter (?api-version=) is required for all requests; "
            f"the supported versions are '{', '.join(supported)}'."
        )


class InvalidApiVersion(ArmError):
    status = 400
    code = "InvalidApiVersionParameter"

    def __init__(self, given: str, supported: Sequence[str]) -> None:
        super().__init__(
            f"The api-version '{given[:40]}' is invalid. "
            f"The supported versions are '{', '.join(supported)}'."
        )


class ResourceNotFound(ArmError):
    """Something other than a job does not exist (a job's 404 has a code of its own)."""

    status = 404
    code = "ResourceNotFound"


class CollectionNotFound(ResourceNotFound):
    """A missing collection, in the words of the ARM gateway, which answered for the service."""

    def __init__(self, collection: CollectionId) -> None:
        super().__init__(
            f"The Resource '{PROVIDER}/jobcollections/{collection.name}' under resource group "
            f"'{collection.resource_group}' was not found."
        )


class JobNotFound(ArmError):
    """A missing job, in the service's own words."""

    status = 404
    code = "NotFound"

    def __init__(self, job: JobId) -> None:
        super().__init__(f"Job '{job.name}' cannot be found.")


class MissingVersionHeader(ArmError):
    """The classic API's answer to a request without a usable `x-ms-version` (its own words)."""

    status = 400
    code = "MissingOrIncorrectVersionHeader"

    def __init__(self) -> None:
        super().__init__("The versioning header is not specified or was specified incorrectly.")


class InvalidClassicApiVersion(ArmError):
    status = 400
    code = "InvalidApiVersionParameter"

    def __init__(self, given: str, supported: Sequence[str]) -> None:
        super().__init__(
            f"The api-version query parameter is '{given[:40]}', which is not supported; this "
            f"route takes api-version '{', '.join(supported)}'."
        )


class CloudServiceNotFound(ResourceNotFound):
    def __init__(self, cloud_service: CloudServiceId) -> None:
        super().__init__(f"The cloud service '{cloud_service.name}' does not exist.")


class JobCollectionNotFound(ResourceNotFound):
    """A missing collection, as the classic API names it (inside its cloud service)."""

    def __init__(self, collection: CollectionId) -> None:
        super().__init__(
            f"The job collection '{collection.name}' does not exist in cloud service "
            f"'{collection.resource_group}'."
        )


class OperationNotFound(ResourceNotFound):
    def __init__(self, request_id: str) -> None:
        super().__init__(f"There is no operation with request id '{request_id[:40]}'.")


class CloudServiceExists(ArmError):
    status = 409
    code = "ConflictError"

    def __init__(self, cloud_service: CloudServiceId) -> None:
        super().__init__(
            f"The cloud service '{cloud_service.name}' already exists (a cloud service is also "
            "any resource group that holds job collections)."
        )


class AuthenticationFailed(ArmError):
    status = 401
    code = "AuthenticationFailed"


class InvalidAuthenticationToken(ArmError):
    status = 401
    code = "InvalidAuthenticationToken"


class AuthorizationFailed(ArmError):
    """ARM's 403: the caller, the action and the scope, in ARM's words (shared/domain/access)."""

    status = 403
    code = "AuthorizationFailed"

    def __init__(self, caller: Caller, action: Action, scope: str) -> None:
        super().__init__(refusal_message(caller, action, scope))
        self.caller = caller


class Conflict(ArmError):
    status = 409
    code = "Conflict"


class PreconditionFailed(ArmError):
    status = 412
    code = "PreconditionFailed"

    def __init__(self) -> None:
        super().__init__(
            "The resource has changed since it was read: its ETag does not match If-Match."
        )


class UnsupportedMediaType(ArmError):
    status = 415
    code = "UnsupportedMediaType"

    def __init__(self, content_type: str) -> None:
        super().__init__(f"The request body must be JSON, not '{content_type[:60]}'.")


class InvalidTemplate(ArmError):
    """A template that cannot be applied; `additionalInfo` names the resource, the property and
    the expression, as ARM's own InvalidTemplate names the template's line and path."""

    status = 400
    code = "InvalidTemplate"

    def __init__(self, error: TemplateError) -> None:
        super().__init__(error.message)
        self.violation: TemplateViolation = {
            "resource": error.resource,
            "property": error.property,
            "expression": error.expression,
        }

    @property
    def envelope(self) -> ErrorEnvelope:
        info: AdditionalInfo = {"type": "TemplateViolation", "info": self.violation}
        return {"error": {"code": self.code, "message": self.message, "additionalInfo": [info]}}


def arm_error(error: Exception) -> ArmError | None:
    """The ARM error a failure of any layer answers as; None for a fault of the service's own."""
    match error:
        case ArmError():
            return error
        case TemplateError():
            return InvalidTemplate(error)
        case InvalidRequest():
            return InvalidFields(error.message, error.errors)
        case Refused():
            return Conflict(error.message)
        case NotFound(resource=JobId() as job):
            return JobNotFound(job)
        case NotFound(resource=CollectionId() as collection):
            return CollectionNotFound(collection)
        case ModifiedConcurrently(kind=kind):
            return Conflict(f"The {kind} is being changed by other requests; try again.")
        case EtagMismatch():
            return PreconditionFailed()
        case QuotaExceeded(jobs=jobs):
            return Conflict(
                f"The job collection already holds {jobs} jobs, its quota maxJobCount; "
                "delete a job or raise the quota."
            )
        case RuleBroken():  # a rule added later without a case of its own: still the client's
            return BadRequest(error.message)
        case StorageError():
            return Conflict(f"The request could not be carried out: {error}.")
        case ServiceRequestError() | ServiceResponseError():
            return StorageUnavailable()
        case HttpResponseError(status_code=int(status)) if status >= 500 or status in (408, 429):
            return StorageUnavailable()
    return None
