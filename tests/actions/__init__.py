"""Helpers of the performers' tests."""

from __future__ import annotations

from typing import Any

from shared.domain.job_definition import Action


def typed(action: dict[str, Any]) -> Action:
    """An action as a performer is handed it: read from its JSON, as from a stored definition."""
    return Action.model_validate(action)
