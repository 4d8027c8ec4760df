"""What storage reports in its own words; the API layer maps each to its ARM error."""

from __future__ import annotations

from shared.domain.ids import CloudServiceId, CollectionId, JobId


class StorageError(Exception):
    """A write or read that storage could not carry out as asked."""


class NotFound(StorageError):
    """The cloud service, collection or job does not exist."""

    def __init__(self, resource: CloudServiceId | CollectionId | JobId) -> None:
        super().__init__(f"{resource.arm_id} does not exist")
        self.resource = resource


class ModifiedConcurrently(StorageError):
    """Other writers kept changing the resource: every optimistic attempt lost its race."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"the {kind} kept changing while it was being written")
        self.kind = kind


class EtagMismatch(StorageError):
    """If-Match or If-None-Match did not hold for the stored version."""

    def __init__(self) -> None:
        super().__init__("the stored version does not match the precondition")


class QuotaExceeded(StorageError):
    """A new job would take its collection past maxJobCount."""

    def __init__(self, jobs: int) -> None:
        super().__init__(f"the collection holds {jobs} jobs")
        self.jobs = jobs


class ChangedSinceRead(StorageError):
    """The job was written (or created, or deleted) by someone else after the caller read it:
    a document built from that read must not be written. The caller reads the job again and
    builds its document anew (`Scheduling.save_definition` does)."""

    def __init__(self, job: JobId) -> None:
        super().__init__(f"{job.arm_id} changed since it was read")
        self.job = job


class CollectionChanged(ChangedSinceRead):
    """The job's collection changed what its jobs' writes depend on (its SKU, quota or region;
    or it was created anew) after the caller read it: the caller reads the collection again
    and builds the job's document anew, as for a job changed since read."""

    def __init__(self, job: JobId) -> None:
        super().__init__(job)
        self.args = (f"{job.collection.arm_id} changed since it was read",)
