"""Collections, as every store keeps them (conftest.py: the stores)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from shared.domain.collection import CollectionState
from shared.domain.ids import CollectionId, JobId
from shared.domain.job_document import JobDocument
from shared.storage.errors import CollectionChanged, EtagMismatch, NotFound
from shared.storage.interface import Preconditions, Storage, StoredCollection
from tests.job_properties import properties_in
from tests.storage.conformance.conftest import collection_document

DOCUMENT = JobDocument(properties_in("Enabled"), datetime(2026, 11, 22, tzinfo=UTC))


def test_a_collection_is_none_or_not_found_until_saved(
    store: Storage, new_id: Callable[[], CollectionId]
) -> None:
    missing = new_id()
    assert store.collections.collection(missing) is None
    with pytest.raises(NotFound):
        store.collections.existing_collection(missing)


def test_a_replace_keeps_names_case_and_incarnation_and_changes_the_etag(
    store: Storage, collection: StoredCollection
) -> None:
    shouted = CollectionId(
        collection.id.subscription, collection.id.resource_group.upper(), collection.id.name.upper()
    )
    replaced, created = store.collections.save_collection(
        shouted, collection_document("P10Premium"), Preconditions(if_match=collection.etag)
    )
    assert not created
    assert replaced.etag != collection.etag
    assert replaced.incarnation == collection.incarnation != ""
    assert replaced.id == collection.id  # the case it was created with
    read = store.collections.existing_collection(shouted)
    assert (read.etag, read.id) == (replaced.etag, collection.id)
    assert read.document == replaced.document != collection.document


@pytest.mark.parametrize(
    "preconditions",
    [Preconditions(if_match='W/"stale"'), Preconditions(if_none_match="*")],
    ids=["stale-if-match", "if-none-match-star"],
)
def test_a_replace_refused_by_its_preconditions_changes_nothing(
    store: Storage, collection: StoredCollection, preconditions: Preconditions
) -> None:
    with pytest.raises(EtagMismatch):
        store.collections.save_collection(collection.id, collection_document("P10Premium"), preconditions)
    assert store.collections.existing_collection(collection.id) == collection


def test_if_match_on_a_missing_collection_is_refused(
    store: Storage, new_id: Callable[[], CollectionId]
) -> None:
    missing = new_id()
    with pytest.raises(EtagMismatch):
        store.collections.save_collection(missing, collection_document(), Preconditions(if_match="*"))
    with pytest.raises(EtagMismatch):
        store.collections.delete_collection(missing, Preconditions(if_match="*"))
    assert store.collections.collection(missing) is None


def test_listings_are_in_key_order_and_by_resource_group(store: Storage) -> None:
    subscription = f"conformance-list-{uuid.uuid4().hex[:10]}"
    names = [("b-group", "Zeta"), ("a-group", "beta"), ("a-group", "Alpha"), ("a-groupx", "c")]
    for group, name in names:
        store.collections.save_collection(
            CollectionId(subscription, group, name), collection_document(), Preconditions()
        )
    listed = [(c.id.resource_group, c.id.name) for c in store.collections.collections(subscription)]
    assert listed == [("a-group", "Alpha"), ("a-group", "beta"), ("a-groupx", "c"), ("b-group", "Zeta")]
    in_group = [c.id.name for c in store.collections.collections(subscription, "A-GROUP")]
    assert in_group == ["Alpha", "beta"]
    everywhere = {c.id for c in store.collections.all_collections() if c.id.subscription == subscription}
    assert everywhere == {CollectionId(subscription, group, name) for group, name in names}
    for group, name in names:
        assert store.collections.delete_collection(CollectionId(subscription, group, name), Preconditions())


def test_a_deletion_takes_jobs_history_and_state_and_a_new_incarnation_starts_empty(
    store: Storage, collection: StoredCollection
) -> None:
    job = JobId(collection.id, "job")
    store.jobs.save_job(job, DOCUMENT, Preconditions(), store.jobs.job_slot(job))
    store.history.add(job, [("0001", {"status": "Completed"})])
    store.executor.set_collection_state(collection.id, "Enabled")
    with pytest.raises(EtagMismatch):
        store.collections.delete_collection(collection.id, Preconditions(if_match='W/"stale"'))
    assert store.jobs.job(job) is not None
    assert store.collections.delete_collection(collection.id, Preconditions(if_match=collection.etag))
    assert not store.collections.delete_collection(collection.id, Preconditions())
    assert store.collections.collection(collection.id) is None
    assert store.jobs.job(job) is None
    assert store.history.entries(job) == []
    assert store.executor.collection_state(collection.id) is None
    again, created = store.collections.save_collection(collection.id, collection_document(), Preconditions())
    assert created
    assert again.incarnation != collection.incarnation
    assert store.jobs.jobs(again.id) == []


def test_a_new_incarnation_sweeps_stragglers_but_keeps_the_recorded_state(
    store: Storage, new_id: Callable[[], CollectionId]
) -> None:
    collection = new_id()
    straggler = JobId(collection, "straggler")
    store.executor.set_collection_state(collection, "Suspended")
    store.jobs.save_job(straggler, DOCUMENT, Preconditions(), store.jobs.job_slot(straggler))
    store.history.add(straggler, [("0001", {"status": "Completed"})])
    _, created = store.collections.save_collection(collection, collection_document(), Preconditions())
    assert created
    assert store.jobs.job(straggler) is None
    assert store.history.entries(straggler) == []
    assert store.executor.collection_state(collection) == "Suspended"
    assert store.jobs.job_slot(JobId(collection, "x"), counted=True).jobs_in_collection == 0


def test_a_job_created_within_a_deleted_collection_is_not_kept(
    store: Storage, collection: StoredCollection
) -> None:
    store.collections.delete_collection(collection.id, Preconditions())
    job = JobId(collection.id, "late")
    with pytest.raises(NotFound) as refused:
        store.jobs.save_job(job, DOCUMENT, Preconditions(), store.jobs.job_slot(job), within=collection)
    assert refused.value.resource == collection.id
    assert store.jobs.job(job) is None
    # Nor within a collection of the same name created anew (another incarnation): the writer
    # is to build its document on that one.
    store.collections.save_collection(collection.id, collection_document(), Preconditions())
    with pytest.raises(CollectionChanged):
        store.jobs.save_job(job, DOCUMENT, Preconditions(), store.jobs.job_slot(job), within=collection)
    assert store.jobs.job(job) is None
    current = store.collections.existing_collection(collection.id)
    stored, created = store.jobs.save_job(
        job, DOCUMENT, Preconditions(), store.jobs.job_slot(job), within=replace(current)
    )
    assert created and store.jobs.job(job) == stored


def test_a_job_write_built_on_terms_changed_since_is_not_made(
    store: Storage, collection: StoredCollection
) -> None:
    """A change of what job writes depend on (SKU, quota, region) gives the collection a new
    version; a create or a replace built on the version before is refused as CollectionChanged
    (a ChangedSinceRead), and nothing is written. A change of anything else keeps the version."""
    created, replaced = JobId(collection.id, "created"), JobId(collection.id, "replaced")
    before, _ = store.jobs.save_job(
        replaced, DOCUMENT, Preconditions(), store.jobs.job_slot(replaced), within=collection
    )
    disabled = replace(collection.document, state=CollectionState.DISABLED)
    same_terms, _ = store.collections.save_collection(collection.id, disabled, Preconditions())
    assert same_terms.version == collection.version != ""
    premium, _ = store.collections.save_collection(
        collection.id, collection_document("P10Premium"), Preconditions()
    )
    assert premium.version != collection.version
    assert premium.incarnation == collection.incarnation
    for job in (created, replaced):
        with pytest.raises(CollectionChanged):
            store.jobs.save_job(
                job, DOCUMENT, Preconditions(), store.jobs.job_slot(job), within=collection
            )
    assert store.jobs.job(created) is None and store.jobs.job(replaced) == before
    rewritten, _ = store.jobs.save_job(
        replaced, DOCUMENT, Preconditions(), store.jobs.job_slot(replaced), within=premium
    )
    assert rewritten.etag != before.etag
