"""What a process knows of which jobs its collections hold (shared/storage/job_names.py)."""

from __future__ import annotations

from shared.storage.job_names import JobNames


def test_a_name_is_absent_only_in_a_collection_whose_names_are_known() -> None:
    names = JobNames()
    assert names.absent("collection", "job") is None  # nothing known: read the job
    names.seen("collection", "job", there=True)  # a read of a collection not known teaches nothing
    assert names.absent("collection", "job") is None
    names.learn("collection", ["listed"])
    assert names.absent("collection", "listed") is False
    assert names.absent("collection", "job") is True


def test_what_the_process_creates_finds_and_deletes_keeps_the_names_current() -> None:
    names = JobNames()
    names.learn("collection", [])
    names.seen("collection", "created", there=True)
    assert names.absent("collection", "created") is False
    names.seen("collection", "created", there=False)
    assert names.absent("collection", "created") is True
    names.forget("collection")
    assert names.absent("collection", "created") is None


def test_a_collection_with_too_many_jobs_is_never_taken_for_holding_none() -> None:
    names = JobNames()
    names.learn("large", None)
    assert names.absent("large", "any") is False  # known as listed: each job is read
    names.seen("large", "any", there=False)
    assert names.absent("large", "any") is False


def test_the_collections_used_least_recently_are_forgotten_first() -> None:
    names = JobNames(remembered=2)
    names.learn("first", [])
    names.learn("second", [])
    assert names.absent("first", "job") is True  # used: now the most recent
    names.learn("third", [])
    assert names.absent("second", "job") is None
    assert names.absent("first", "job") is True and names.absent("third", "job") is True
