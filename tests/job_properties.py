"""A job definition for tests that store documents and care only for its state."""

from __future__ import annotations

from shared.domain.job_definition import JobProperties
from shared.storage.job_codec import decode_properties


def properties_in(state: str) -> JobProperties:
    """A one-off HTTP job's stored definition, in `state` (a final state too, as stored)."""
    action = {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}}
    return decode_properties({"state": state, "action": action})
