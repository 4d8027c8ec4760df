"""Changing the state of every job in a collection at once, and resuming them."""

from __future__ import annotations

from datetime import datetime

from shared.dispatch import Dispatcher
from shared.execution import Delivery, Pending, pending_of, resumed, with_pending
from shared.jobs import FINAL_STATE_VALUES, JobState
from shared.resources import CollectionId
from shared.store import Store, Stored


def set_job_states(
    collection: CollectionId,
    state: JobState | None,
    moment: datetime,
    *,
    store: Store,
    dispatcher: Dispatcher,
) -> None:
    """Set every job's state (None keeps each one's); enabled jobs resume, without catch-up."""
    changed, deliveries = [], []
    for stored in store.jobs(collection):
        definition = stored.document["definition"]
        if definition["state"] in FINAL_STATE_VALUES:
            continue
        document = stored.document
        if state is not None:
            document = {**document, "definition": {**definition, "state": state.value}}
            document = with_pending(document, pending_of(document))
        added: list[Pending] = []
        if document["definition"]["state"] == JobState.ENABLED.value:
            document, added = resumed(document, moment)
        if document == stored.document:
            continue
        changed.append(Stored(stored.id, document, stored.etag))
        deliveries += [Delivery(stored.id, document["definedAt"], entry) for entry in added]
    # Sent before the writes, as a job's PUT does (see execution.NotYet).
    dispatcher.dispatch(deliveries, moment)
    store.replace_jobs(changed)
