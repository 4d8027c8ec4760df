"""What is wrong with a definition: each problem names its field (a JSON path) and the rule."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


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


def _problem(detail: Any) -> str:
    """pydantic's finding in the API's own words (JSON types, the value that was sent)."""
    kind, context, sent = detail["type"], detail.get("ctx", {}), _shown(detail.get("input"))
    if kind == "extra_forbidden":
        return "is not a known property"
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
    return message[:1].lower() + message[1:]


def _shown(value: object) -> str:
    """A sent value as JSON, cut short: enough to recognise, never a wall of text."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
