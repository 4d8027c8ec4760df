"""A job's secrets (docs/behaviour.md#secrets): what a read of it leaves out or masks, what a
write that sends the masks back gets back, and what history must never quote.

The secret fields (a password, a pfx, an OAuth secret, a SAS token or key) are left out of
what a client reads; keys in plain fields (a URI's query or user-info, credential headers) are
masked (`shared.domain.redaction` says which). A client that reads a job and writes it back
sends the masks: `keeping_stored_secrets` puts the stored values back, but only for the endpoint
they came from.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from pydantic.alias_generators import to_snake

from shared.domain.job_definition import (
    AnyAction,
    ErrorAction,
    HttpActionRequest,
    HttpAuthentication,
    HttpAuthenticationType,
    JobProperties,
)
from shared.domain.redaction import (
    redact_headers,
    redact_uri,
    request_secret_values,
    restored_headers,
    restored_uri,
    same_endpoint,
)
from shared.domain.wire import JsonObject

# Where each secret field lives in an action, by its names on the wire: (message,
# [sub-object], field). A read of a job leaves them out; a PATCH keeps them only where they went.
SECRETS = (
    ("request", "authentication", "password"),
    ("request", "authentication", "pfx"),
    ("request", "authentication", "secret"),
    ("queueMessage", "sasToken"),
    ("serviceBusQueueMessage", "authentication", "sasKey"),
    ("serviceBusTopicMessage", "authentication", "sasKey"),
)


def _exclusion(places: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    """`places` as pydantic's `exclude` of an action: nested by field name."""
    tree: dict[str, Any] = {}
    for *steps, field in places:
        node = tree
        for step in steps:
            node = node.setdefault(to_snake(step), {})
        node[to_snake(field)] = True
    return tree


_ACTION_SECRETS = _exclusion(SECRETS)
_SECRET_FIELDS = {"action": {**_ACTION_SECRETS, "error_action": _ACTION_SECRETS}}
# How a request of a definition is changed, given the same action's request in another one.
_RequestChange = Callable[[HttpActionRequest, HttpActionRequest | None], HttpActionRequest]


def public_properties(properties: JobProperties) -> JsonObject:
    """What a client reads of a definition (an API body): without its secret fields, the keys
    in its URIs and headers masked."""
    return redacted_properties(properties).model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude=_SECRET_FIELDS
    )


def redacted_properties(properties: JobProperties) -> JobProperties:
    """The definition with the keys in its URIs and headers masked (its secret fields kept)."""

    def redacted(request: HttpActionRequest, _: HttpActionRequest | None) -> HttpActionRequest:
        headers = request.headers
        return request.model_copy(
            update={
                "uri": redact_uri(request.uri),
                "headers": None if headers is None else redact_headers(headers),
            }
        )

    return _with_requests(properties, None, redacted)


def keeping_stored_secrets(sent: JobProperties, stored: JobProperties) -> JobProperties:
    """`sent` to replace the `stored` definition, with the masks a read showed (`***`) that it
    carries back replaced by the values `stored` has in those places: a client that reads a job
    and writes it back keeps its keys. Secret fields that a read leaves out are not put back;
    the client sends them.

    A URI equal to the masked form of the stored one is the stored one. Otherwise each masked
    user-info password, secret query value and secret header value is put back from the stored
    definition's same action (main or errorAction), when there is one to put back and the
    request still goes to the same endpoint (`same_endpoint`): a key goes only where it came
    from. A mask with nothing to put back stays as sent.
    """

    def restored(request: HttpActionRequest, before: HttpActionRequest | None) -> HttpActionRequest:
        if before is None:
            return request
        uri = restored_uri(request.uri, before.uri)
        headers = request.headers
        if headers is not None and before.headers is not None and same_endpoint(uri, before.uri):
            headers = restored_headers(headers, before.headers)
        if (uri, headers) == (request.uri, request.headers):
            return request
        return request.model_copy(update={"uri": uri, "headers": headers})

    return _with_requests(sent, stored, restored)


def secret_values(properties: JobProperties) -> set[str]:
    """Every secret value a stored definition holds, in the forms a target could echo back:
    the secret fields, a Basic authentication's header value, the keys in URIs and headers.
    What history and the logs keep of an action's outcome has them masked."""
    values: set[str] = set()
    action = properties.action
    for each in (action, action.error_action):
        if each is None:
            continue
        request, queue_message = each.request, each.queue_message
        if request is not None:
            values |= request_secret_values(request.uri, request.headers)
            authentication = request.authentication
            if authentication is not None:
                values |= _basic_credentials(authentication)
                fields = (authentication.password, authentication.pfx, authentication.secret)
                values |= {value for value in fields if value is not None}
        if queue_message is not None:
            values.add(queue_message.sas_token)
        for message in (each.service_bus_queue_message, each.service_bus_topic_message):
            sas_key = message.authentication.sas_key if message and message.authentication else None
            if sas_key is not None:
                values.add(sas_key)
    return values


def _with_requests(
    properties: JobProperties, other: JobProperties | None, change: _RequestChange
) -> JobProperties:
    """`properties` with each HTTP request (the main action's, the errorAction's) replaced by
    `change(request, the same action's request in other)`."""
    action, error_action = properties.action, properties.action.error_action
    before = other.action if other is not None else None
    before_error = before.error_action if before is not None else None
    changed_error = _with_request(error_action, before_error, change)
    changed = _with_request(action, before, change) or action
    if changed_error is not error_action:
        changed = changed.model_copy(update={"error_action": changed_error})
    if changed is action:
        return properties
    return properties.model_copy(update={"action": changed})


def _with_request(
    action: AnyAction | None, before: ErrorAction | None, change: _RequestChange
) -> AnyAction | None:
    if action is None or action.request is None:
        return action
    request = action.request
    changed = change(request, before.request if before is not None else None)
    return action if changed is request else action.model_copy(update={"request": changed})


def _basic_credentials(authentication: HttpAuthentication) -> set[str]:
    """A Basic authentication's `Authorization` value as sent (base64 of `user:password`)."""
    user, password = authentication.username, authentication.password
    if authentication.type is not HttpAuthenticationType.BASIC or user is None or password is None:
        return set()
    return {base64.b64encode(f"{user}:{password}".encode()).decode()}
