"""Every error the service reports, each knowing its ARM error code and HTTP status."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError


@dataclass(frozen=True)
class FieldError:
    """One thing wrong with a request: the field, in JSON path form, and the rule it breaks."""

    field: str
    problem: str

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}" if self.field else self.problem


class SchedulerError(Exception):
    """An error with a place in the ARM error envelope `{"error": {"code", "message"}}`."""

    status = 500
    code = "InternalServerError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(SchedulerError):
    """The request body breaks one or more rules; the message lists every one of them."""

    status = 400
    code = "BadRequest"

    def __init__(self, errors: Sequence[FieldError]) -> None:
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = tuple(errors)


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
        location = [part for part in detail["loc"] if not _is_union_branch(part)]
        field = field_path(*prefix, *location)
        if detail["type"] == "extra_forbidden":
            yield FieldError(field, "is not a known property")
        elif detail["type"] == "missing":
            yield FieldError(field, "is required")
        else:
            yield FieldError(field, _sentence(detail["msg"]))


def _is_union_branch(part: str | int) -> bool:
    # pydantic names the branch of an Optional it tried ("list[int]", "function-after[...]").
    return isinstance(part, str) and ("[" in part or part in {"int", "str", "none"})


def _sentence(message: str) -> str:
    message = message.removeprefix("Value error, ")
    return message[:1].lower() + message[1:]
