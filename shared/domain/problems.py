"""What is wrong with a definition: each problem names its field (a JSON path) and the rule."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from shared.domain.redaction import is_secret_header


@dataclass(frozen=True)
class FieldError:
    """One thing wrong with what was sent: the field, in JSON path form, and the rule it breaks."""

    field: str
    problem: str

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}" if self.field else self.problem


class RuleBroken(Exception):
    """A rule of the service refuses what was asked; the API layer gives each kind its status."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(RuleBroken):
    """What was sent breaks one or more rules; the message lists every one of them."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = tuple(errors)

    @classmethod
    def because(cls, field: str, problem: str) -> InvalidRequest:
        return cls([FieldError(field, problem)])


class Refused(RuleBroken):
    """Well-formed, but in conflict with the state of things: a final job state, a quota."""


def field_path(*parts: str | int) -> str:
    """`("recurrence", "schedule", "minutes", 2)` -> `recurrence.schedule.minutes[2]`."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part:
            path += f".{part}" if path else part
    return path


def field_errors(error: ValidationError, *prefix: str | int) -> list[FieldError]:
    """pydantic's findings in the API's words: a JSON path (wire names) and what is wrong."""
    return list(_translate(error, prefix))


def _translate(error: ValidationError, prefix: tuple[str | int, ...]) -> Iterable[FieldError]:
    for detail in error.errors(include_url=False):
        yield FieldError(field_path(*prefix, *detail["loc"]), _problem(detail))


def is_secret_field(location: Sequence[str | int]) -> bool:
    """Whether the value at a JSON path (wire names) may be a secret, so that no message may
    quote it: a field whose name says so (`password`, `pfx`, `secret`, `sasToken`, `sasKey`,
    any `...Key` or `...Token`), a URI (its user-info and query may hold keys), or a header that
    carries credentials (`Authorization`, `X-Api-Key`)."""
    names = [str(part).casefold() for part in location if isinstance(part, str)]
    if not names:
        return False
    if "headers" in names[:-1]:
        return is_secret_header(names[-1])
    return any(fragment in names[-1] for fragment in SECRET_FIELD_FRAGMENTS) or names[-1] == "uri"


# Fragments of field names that mark a secret; they cover every field of
# `job_secrets.SECRETS` (password, pfx, secret, sasToken, sasKey).
SECRET_FIELD_FRAGMENTS = ("password", "secret", "key", "token", "pfx", "signature")
# pydantic's findings that an object or a list was expected.
_CONTAINER_KINDS = {"model_type", "dict_type", "model_attributes_type", "list_type", "tuple_type"}


def _problem(detail: Any) -> str:
    """pydantic's finding in the API's own words (JSON types, the value that was sent).

    A sent value is quoted only where it cannot be a secret: never for a secret field, never
    an object or an array, and never where an object or a list was expected (what was sent
    there may hold anything, a whole authentication block); there, only its JSON type is named.
    """
    kind, context, value = detail["type"], detail.get("ctx", {}), detail.get("input")
    secret = is_secret_field(detail["loc"])
    described = secret or kind in _CONTAINER_KINDS or isinstance(value, dict | list | tuple)
    sent = json_type(value) if described else _shown(value)
    if kind == "missing":
        return "is required"
    if kind in {"greater_than_equal", "greater_than"}:
        return f"{sent} is too small: the least allowed is {context.get('ge', context.get('gt'))}"
    if kind in {"less_than_equal", "less_than"}:
        return f"{sent} is too large: the most allowed is {context.get('le', context.get('lt'))}"
    if kind.startswith("int_"):
        return f"must be a whole number, not {sent}"
    if kind == "string_type":
        return f"must be a string, not {sent}"
    if kind == "enum":
        return f"{sent} is not one of {context['expected']}"
    if kind in {"tuple_type", "list_type"}:
        return f"must be a list, not {sent}"
    if kind in {"model_type", "dict_type", "model_attributes_type"}:
        return f"must be an object, not {sent}"
    if kind == "too_long":
        return f"has {context['actual_length']} items; at most {context['max_length']} are allowed"
    message = str(detail["msg"]).removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    if secret and _quotes(message, value):
        return f"is not valid ({json_type(value)} sent)"
    return message


def _shown(value: object) -> str:
    """A sent value as JSON, cut short: enough to recognise, never a wall of text."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def json_type(value: object) -> str:
    """The JSON type of a sent value, in words: `an array`, `a string`, `null`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object"


def _quotes(message: str, value: object) -> bool:
    """Whether a message may hold (part of) a sent value: any of its strings or numbers."""
    if isinstance(value, dict):
        return any(_quotes(message, part) for part in (*value.keys(), *value.values()))
    if isinstance(value, list | tuple):
        return any(_quotes(message, part) for part in value)
    if isinstance(value, str):
        return bool(value) and (value in message or value[:20] in message)
    return value is not None and str(value) in message
