"""Which secrets of a stored job a JSON merge patch may keep (docs/behaviour.md#secrets).

A PATCH sends only what changes, so the stored secrets would ride along into whatever the patch
makes of the job; a secret may stay only where it went before. Both PATCH handlers (ARM and the
classic API) apply the patch to JSON, so this works on the definition as JSON.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from shared.domain.job_secrets import SECRETS
from shared.domain.redaction import is_secret_header, same_endpoint
from shared.domain.wire import JsonObject

# Where the secrets of an action that sends no HTTP request go: (message, field naming the place).
_MESSAGE_DESTINATIONS = (
    ("queueMessage", "storageAccount"),
    ("serviceBusQueueMessage", "namespace"),
    ("serviceBusTopicMessage", "namespace"),
)


def secrets_staying(stored: JsonObject, merged: Any) -> JsonObject:
    """The `stored` definition without the secrets of each action (main or errorAction) that
    `merged`, the stored one with a PATCH applied, sends to another place: what the PATCH is
    applied to again, so that a secret it does not send itself goes only where it came from
    (docs/behaviour.md#secrets). The secrets are the secret fields and the credential headers;
    an HTTP request's place is its endpoint (`same_endpoint`), a queue message's its storage
    account, a Service Bus message's its namespace."""
    kept = copy.deepcopy(stored)
    action = kept.get("action")
    after = merged.get("action") if isinstance(merged, dict) else None
    if not isinstance(action, dict):
        return kept
    after_error = after.get("errorAction") if isinstance(after, dict) else None
    for before, now in ((action, after), (action.get("errorAction"), after_error)):
        if isinstance(before, dict) and not _goes_where_it_went(before, now):
            _drop_secrets(before)
    return kept


def _goes_where_it_went(before: JsonObject, after: Any) -> bool:
    if not isinstance(after, dict):
        return False
    request, request_after = before.get("request"), after.get("request")
    if isinstance(request, dict):
        uri = request.get("uri")
        uri_after = request_after.get("uri") if isinstance(request_after, dict) else None
        if not (isinstance(uri, str) and isinstance(uri_after, str)):
            return False
        if not same_endpoint(uri, uri_after):
            return False
    for message, place in _MESSAGE_DESTINATIONS:
        sent = before.get(message)
        if not isinstance(sent, dict):
            continue
        sent_after = after.get(message)
        where = sent_after.get(place) if isinstance(sent_after, dict) else None
        if not isinstance(where, str) or where.casefold() != str(sent.get(place)).casefold():
            return False
    return True


def _drop_secrets(action: JsonObject) -> None:
    for holder, secret in _secret_places(action):
        holder.pop(secret, None)
    request = action.get("request")
    headers = request.get("headers") if isinstance(request, dict) else None
    if isinstance(headers, dict):
        for name in [name for name in headers if is_secret_header(name)]:
            del headers[name]


def _secret_places(action: JsonObject) -> Iterator[tuple[JsonObject, str]]:
    """Each (object, name) of an action where a secret field may be (the object may be empty)."""
    for *place, secret in SECRETS:
        holder = action
        for step in place:
            inner = holder.get(step)
            holder = inner if isinstance(inner, dict) else {}
        yield holder, secret
