"""Applying a template's plan (shared/domain/templates/planning.py) to this service: each
Microsoft.Scheduler resource through the same save path as its PUT, in dependency order.

Incremental mode creates or updates what the template names and leaves the rest; complete mode
then deletes the jobs of the imported collections that the template does not name; what-if
checks every resource as a save would and changes nothing. Each resource gets one outcome. A
failure stops the import where it is, as an ARM deployment stops: what was applied before it
stays applied (and is reported so), and running the import again converges.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from pydantic import ValidationError

from shared.domain.collection import CollectionBody, SkuName
from shared.domain.collection_document import CollectionDocument
from shared.domain.ids import JOB_TYPE, CollectionId, JobId
from shared.domain.job_definition import JobBody, JobProperties, JobState
from shared.domain.job_document import stored_properties
from shared.domain.job_rules import definition_problems
from shared.domain.job_secrets import keeping_stored_secrets, public_properties, secret_values
from shared.domain.problems import InvalidRequest, RuleBroken, field_errors
from shared.domain.redaction import masked_values
from shared.domain.schedule.occurrences import Occurrences
from shared.domain.templates.deployment import ImportMode, Plan, PlannedResource
from shared.domain.wire import IgnoredProperty, JsonObject, ignored_properties, iso
from shared.execution.scheduling import Scheduling
from shared.storage.errors import StorageError
from shared.storage.interface import Preconditions, Storage


class Outcome(enum.StrEnum):
    """What happened to one resource (or, in what-if, what would)."""

    CREATED = "Created"
    UPDATED = "Updated"
    UNCHANGED = "Unchanged"
    DELETED = "Deleted"
    SKIPPED = "Skipped"
    FAILED = "Failed"
    NOT_APPLIED = "NotApplied"  # after a failure: the import stopped before it


class ResourceOutcomeBody(TypedDict):
    """One resource's outcome as the import's answer writes it."""

    type: str
    name: str
    id: NotRequired[str]
    outcome: str
    reason: NotRequired[str]
    warnings: NotRequired[list[str]]
    firstRun: NotRequired[str]  # a job's: its first run if imported now (what-if: if it were)


class ImportReportBody(TypedDict):
    """The import's answer."""

    status: str  # Succeeded or Failed
    mode: str
    whatIf: bool
    summary: dict[str, int]  # how many resources had each Outcome
    resources: list[ResourceOutcomeBody]


@dataclass
class ResourceOutcome:
    type: str
    name: str
    outcome: Outcome
    id: str | None = None
    reason: str | None = None
    ignored: list[IgnoredProperty] = field(default_factory=list)  # of its body
    notes: list[str] = field(default_factory=list)  # said with the warnings
    first_run: datetime | None = None

    def to_wire(self) -> ResourceOutcomeBody:
        outcome = self.outcome.value
        shown: ResourceOutcomeBody = (
            {"type": self.type, "name": self.name, "id": self.id, "outcome": outcome}
            if self.id
            else {"type": self.type, "name": self.name, "outcome": outcome}
        )
        if self.reason:
            shown["reason"] = self.reason
        if self.ignored or self.notes:
            shown["warnings"] = [each.warning() for each in self.ignored] + self.notes
        if self.first_run is not None:
            shown["firstRun"] = iso(self.first_run)
        return shown


@dataclass
class ImportReport:
    mode: ImportMode
    what_if: bool
    resources: list[ResourceOutcome] = field(default_factory=list)
    failure: Exception | None = None

    @property
    def succeeded(self) -> bool:
        return self.failure is None

    def to_wire(self) -> ImportReportBody:
        counts: dict[str, int] = {}
        for each in self.resources:
            counts[each.outcome.value] = counts.get(each.outcome.value, 0) + 1
        return {
            "status": "Succeeded" if self.succeeded else "Failed",
            "mode": self.mode.value,
            "whatIf": self.what_if,
            "summary": counts,
            "resources": [each.to_wire() for each in self.resources],
        }


@dataclass
class _Run:
    """One import's where and when, and the SKU each planned collection will have (what-if
    checks jobs against it before the collection exists)."""

    subscription: str
    resource_group: str
    now: datetime
    what_if: bool
    secrets: frozenset[str] = frozenset()  # the template's secure values (Plan.secrets)
    default_start: datetime | None = None  # given to jobs without a startTime
    planned_skus: dict[str, SkuName] = field(default_factory=dict)


class TemplateImport:
    """One import of a plan into one resource group."""

    def __init__(self, storage: Storage, scheduling: Scheduling) -> None:
        self._storage, self._scheduling = storage, scheduling

    def apply(
        self,
        plan: Plan,
        subscription: str,
        resource_group: str,
        now: datetime,
        *,
        mode: ImportMode = ImportMode.INCREMENTAL,
        what_if: bool = False,
        default_start: datetime | None = None,
    ) -> ImportReport:
        """`default_start`: the startTime of the jobs that have none (None: they run at once)."""
        report = ImportReport(mode, what_if)
        report.resources += [
            ResourceOutcome(s.type, s.name, Outcome.SKIPPED, reason=s.reason) for s in plan.skipped
        ]
        run = _Run(subscription, resource_group, now, what_if, plan.secrets, default_start)
        for position, resource in enumerate(plan.resources):
            outcome = ResourceOutcome(resource.type, resource.name, Outcome.NOT_APPLIED)
            report.resources.append(outcome)
            try:
                if resource.is_job:
                    self._job(run, resource, outcome)
                else:
                    self._collection(run, resource, outcome)
            except (RuleBroken, StorageError) as failed:
                outcome.outcome = Outcome.FAILED
                outcome.reason = masked_values(_said(failed), plan.secrets)
                report.failure = failed
                report.resources += [
                    ResourceOutcome(rest.type, rest.name, Outcome.NOT_APPLIED)
                    for rest in plan.resources[position + 1 :]
                ]
                return report
        if mode is ImportMode.COMPLETE:
            self._delete_unnamed(plan, subscription, resource_group, report, what_if)
        return report

    def _collection(self, run: _Run, resource: PlannedResource, outcome: ResourceOutcome) -> None:
        collection = CollectionId.of(run.subscription, run.resource_group, resource.name)
        outcome.id = collection.arm_id
        body = _read(CollectionBody, resource.body, outcome)
        if body.location is None:
            raise InvalidRequest.because("location", "is required")
        document = CollectionDocument.created(body)
        run.planned_skus[resource.name.casefold()] = document.sku
        previous = self._storage.collections.collection(collection)
        if previous is not None and previous.document == document:
            outcome.outcome = Outcome.UNCHANGED
            return
        outcome.outcome = Outcome.CREATED if previous is None else Outcome.UPDATED
        if not run.what_if:
            self._scheduling.save_collection_with_jobs(
                collection, document, run.now, preconditions=Preconditions(), previous=previous
            )

    def _job(self, run: _Run, resource: PlannedResource, outcome: ResourceOutcome) -> None:
        names = resource.name.split("/")
        if len(names) != 2:
            raise InvalidRequest.because(
                "name", f"'{resource.name}' must be a collection's name and a job's: 'jc/job'"
            )
        collection = CollectionId.of(run.subscription, run.resource_group, names[0])
        job = JobId.of(collection, names[1])
        outcome.id = job.arm_id
        properties = _with_start(_read(JobBody, resource.body, outcome).properties, run, outcome)
        current = self._storage.jobs.job_slot(job).current
        stored = None if current is None else current.document.properties
        if run.what_if and stored is not None and _only_secrets_tell(properties, stored,
                                                                     run.secrets):  # fmt: skip
            # Unchanged or Updated would say whether a guessed secret is the stored one.
            outcome.reason = "secret not compared: what-if never says whether a secret matches"
        elif stored is not None and _unchanged(properties, stored):
            outcome.outcome = Outcome.UNCHANGED
            return
        outcome.outcome = Outcome.CREATED if current is None else Outcome.UPDATED
        if run.what_if:
            sku = run.planned_skus.get(names[0].casefold()) or _sku_of(self._storage, collection)
            problems = definition_problems(properties, sku=sku, now=run.now)
            if problems:
                raise InvalidRequest(problems)
            return
        _, created = self._scheduling.save_definition(job, properties, run.now)
        outcome.outcome = Outcome.CREATED if created else Outcome.UPDATED

    def _delete_unnamed(
        self,
        plan: Plan,
        subscription: str,
        resource_group: str,
        report: ImportReport,
        what_if: bool,
    ) -> None:
        named = {r.name.casefold() for r in plan.resources if r.is_job}
        collections = {r.collection_name.casefold(): r.collection_name for r in plan.resources}
        for name in collections.values():
            collection = CollectionId.of(subscription, resource_group, name)
            if self._storage.collections.collection(collection) is None:
                continue  # what-if of a collection not created yet: it has no jobs
            for stored in self._storage.jobs.jobs(collection):
                if f"{name}/{stored.id.name}".casefold() in named:
                    continue
                outcome = ResourceOutcome(
                    JOB_TYPE, f"{stored.id.collection.name}/{stored.id.name}", Outcome.DELETED,
                    id=stored.id.arm_id, reason="complete mode: the template does not name it",
                )  # fmt: skip
                if not what_if:
                    self._scheduling.delete_job(stored.id, Preconditions())
                report.resources.append(outcome)


def _read(
    model: type[CollectionBody] | type[JobBody], body: JsonObject, outcome: ResourceOutcome
) -> Any:
    """A resource's body read as its PUT reads it; the properties it ignores become warnings."""
    try:
        read = model.model_validate(body)
    except ValidationError as invalid:
        raise InvalidRequest(field_errors(invalid)) from None
    outcome.ignored += ignored_properties(model, body)
    return read


def _with_start(properties: JobProperties, run: _Run, outcome: ResourceOutcome) -> JobProperties:
    """The job as imported, with the default start time if it has none; and its first run, or
    what it means to have no start time, said in its outcome."""
    if properties.start_time is None and run.default_start is not None:
        properties = properties.model_copy(update={"start_time": iso(run.default_start)})
    if properties.state is JobState.DISABLED:
        outcome.notes.append("disabled: it does not run until it is enabled")
        return properties
    if properties.start_time is None:
        outcome.notes.append(
            "no startTime: it runs at once when imported, and takes its seconds from that "
            "moment; defaultStartTime (--default-start-time) gives it one"
        )
    outcome.first_run = Occurrences(properties.starts_at, properties.recurrence, run.now).first
    if outcome.first_run is None:
        outcome.notes.append("it would never run: its schedule has no occurrence left")
    return properties


def _unchanged(properties: JobProperties, stored: JobProperties) -> bool:
    """Whether saving `properties` would give the job the definition and state it has."""
    return stored_properties(keeping_stored_secrets(properties, stored)) == stored


def _only_secrets_tell(
    properties: JobProperties, stored: JobProperties, secrets: frozenset[str]
) -> bool:
    """Whether saving `properties` over the `stored` definition changes nothing that a read
    shows, while either holds a secret (a secret field, a key in a URI or header, a secure
    parameter's value): then only the secrets could tell whether the job changes."""
    definition = stored_properties(keeping_stored_secrets(properties, stored))
    if public_properties(definition) != public_properties(stored):
        return False  # it changes in what anyone can read: no secret needed to say so
    if secret_values(definition) or secret_values(stored):
        return True
    texts = _texts(definition.to_wire())
    return any(secret and secret in text for text in texts for secret in secrets)


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


def _sku_of(storage: Storage, collection: CollectionId) -> SkuName:
    return storage.collections.existing_collection(collection).document.sku


def _said(failure: Exception) -> str:
    return failure.message if isinstance(failure, RuleBroken) else str(failure)
