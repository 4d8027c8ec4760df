"""The execution worker: what the queue-triggered executor function does with one message.

Per delivery: read the job and its collection's state (point reads, not a query: a query scans
the partition, history included; the state read is shared with the collection's other jobs due
at the same instant; the job is read ahead while an early message waits, or not at all when
this process knows it, known_jobs.py), decide (`decisions.plan`), claim the try, perform the
action, then record the outcome, the job's new status and what follows in one etag-checked
batch (`decisions.settle`), and only then send what follows. Sending last means a crash can
lose the follow-up only while the message itself is still on the queue: its redelivery finds
the attempt finished and sends the follow-up again (`Resend`).

A message that keeps failing is given up on at its last delivery: its attempt is recorded as
failed, the job moves on, and the host moves the message to the poison queue.

Each recorded outcome is logged as one line at its level (`outcome_log`), naming the job and
the try as history does, and never the target's URL.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta

from shared.actions import ACTION_TIMEOUT_S, Actions
from shared.domain.attempts import Claim, Delivery, Pending
from shared.domain.decisions import (
    Begin,
    Held,
    NotYet,
    Outcome,
    Park,
    Plan,
    Resend,
    Run,
    Skip,
    abandoned,
    plan,
    settle,
    still_pending,
)
from shared.domain.ids import CollectionId
from shared.domain.wire import iso
from shared.execution.claims import GroupedClaims
from shared.execution.dispatch import Dispatcher
from shared.execution.known_jobs import KnownJobs
from shared.execution.messages import Deliveries
from shared.execution.outcome_log import attempt_line, outcome_line
from shared.logs import app_logger
from shared.storage.concurrency import optimistic_attempts
from shared.storage.errors import ModifiedConcurrently
from shared.storage.interface import Storage, StoredJob
from shared.storage.keys import jobs_partition
from shared.telemetry import current as telemetry
from shared.transport import CALLS_AT_ONCE

log = app_logger("scheduler.executor")
# A message may become visible up to ~1.5 s before its attempt is due (see dispatch); one much
# earlier than this goes back on the queue rather than hold a worker.
MOST_EARLY = timedelta(seconds=5)
# While a message that came early waits, its jobs are read (`read_ahead`), each only while the
# first due time is at least this far off: a read takes a few milliseconds, and must never
# delay a start.
READ_AHEAD_UNTIL = timedelta(milliseconds=20)
# The function's awaited wait ends this long before the due time, and the delivery's thread
# sleeps the rest: an event loop wakes a millisecond or so late (its poll rounds up to whole
# milliseconds), a sleeping thread within a tenth of that.
THREAD_SLEEPS_LAST = timedelta(milliseconds=5)
LOOK_AGAIN_AFTER = timedelta(seconds=1)
# How long a claim on a try holds: the longest an action may take (an HTTP action's timeout; a
# Service Bus send bounds itself about as long), and a margin for recording its outcome. Past
# it, the holder is taken for dead and another delivery calls the try's target.
CLAIM_FOR = timedelta(seconds=ACTION_TIMEOUT_S + 20)
# Deliveries of grouped messages running at once, across messages. Each mostly waits (for
# storage, its target, the others' start before it records, its follow-up's message), about a
# second under load. With 64, one worker process at 80/s had p99 lateness 828 ms and topped out
# at 90/s; with 128, 265 ms and 100/s (bench/results/pipeline.md). The connection pools are as
# large: the number is set once, with them.
GROUP_THREADS = CALLS_AT_ONCE


# When many jobs fall due in the same instant, recording the outcomes of those already done
# (the heaviest step, in CPU) waits for the others' actions to go out first, up to this long.
SETTLING_DEFERRED_AT_MOST = 0.2
# Jobs of one collection due at the same instant share one read of the collection's state, made
# at or after that instant, while the read is younger than this.
GATE_SHARED_FOR = timedelta(seconds=1)


class ExecutionWorker:
    def __init__(
        self,
        storage: Storage,
        dispatcher: Dispatcher,
        actions: Actions,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None] = time.sleep,
        max_dequeue_count: int,
    ) -> None:
        """`max_dequeue_count`: the delivery at which the host gives a message up (host.json)."""
        self._storage, self._dispatcher, self._actions = storage, dispatcher, actions
        self._clock, self._sleep, self._max_dequeue_count = clock, sleep, max_dequeue_count
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._starting = _UnderWay()
        self._gates = _SharedGateReads(storage.executor.collection_state, clock)
        self._claims = GroupedClaims(storage.executor.settle_jobs)
        self._known = KnownJobs()

    def close(self) -> None:
        self._actions.close()

    def unread(self, message: Deliveries) -> list[Delivery]:
        """The deliveries whose jobs `read_ahead` would read now: none when the message is due
        within READ_AHEAD_UNTIL or too early to wait for, else those whose job is not known. No
        I/O: the function asks before it hands the reading to a thread, since under load most
        jobs are known and the hand-over would be for nothing."""
        wait = time_to_wait(message.due, self._clock())
        if wait is None or wait < READ_AHEAD_UNTIL:
            return []
        return [delivery for delivery in message.carried if self._known.get(delivery.job) is None]

    def read_ahead(self, message: Deliveries) -> None:
        """Read the jobs of a message that came early, while there is time, so that at its due
        time a delivery starts from the job as read (known_jobs.py): its first request is then
        its claim, which the job's etag checks. A job already known is not read."""
        for delivery in self.unread(message):
            if message.due - self._clock() < READ_AHEAD_UNTIL:
                return
            try:
                stored = self._storage.jobs.job(delivery.job)
            except Exception:
                # Only time was to be saved: the delivery reads the job at its due time, and
                # fails there, as it would have, if storage still fails.
                log.debug("%s", _line(delivery, "could not read ahead"), exc_info=True)
                return
            if stored is not None:
                self._known.offer(stored)

    def seconds_until_due(self, message: Deliveries) -> float:
        """How long a message that came early should wait (awaited by the function, so that
        the wait holds no worker thread): until THREAD_SLEEPS_LAST before its due time; 0 when
        it is due, or too early to wait for."""
        wait = time_to_wait(message.due, self._clock())
        if wait is None:
            return 0.0
        return max(wait - THREAD_SLEEPS_LAST, timedelta(0)).total_seconds()

    def handle(self, message: Deliveries, dequeue_count: int) -> None:
        """Handle one message; raises (so the host retries it) only when it could not finish.

        A message may carry several deliveries due in the same second: each starts at its due
        time, they run side by side, and if any could not finish the message comes again (the
        finished ones then see that they are no longer pending, and do nothing).
        """
        if len(message.carried) == 1:
            self._handle_one(message.carried[0], dequeue_count)
            return
        running = []
        for delivery in sorted(message.carried, key=lambda delivery: delivery.pending.due):
            # Waited out here, in the message's thread, so that the shared threads only ever
            # hold work that is due: a delivery queued behind sleepers would start late.
            self._wait_out(delivery)
            running.append(self._side_by_side().submit(self._handle_one, delivery, dequeue_count))
        failures = [failure for done in running if (failure := done.exception()) is not None]
        if failures:
            raise failures[0]

    def _side_by_side(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(GROUP_THREADS, thread_name_prefix="delivery")
            return self._pool

    def _handle_one(self, delivery: Delivery, dequeue_count: int) -> None:
        try:
            self._handle(delivery, redelivered=dequeue_count > 1)
        except Exception as failure:
            if dequeue_count >= self._max_dequeue_count:
                self._give_up(delivery, failure, dequeue_count)
            raise

    def _handle(self, delivery: Delivery, *, redelivered: bool) -> None:
        if not self._wait_out(delivery):
            self._dispatcher.send_again(delivery, self._clock())  # looked at again, nearer its time
            return
        with telemetry().execution(delivery):
            with self._starting.under_way():
                started = self._start(delivery, redelivered=redelivered)
            if started is not None:
                self._starting.wait_until_none(SETTLING_DEFERRED_AT_MOST)
                self._record(delivery, *started)

    def _start(
        self, delivery: Delivery, *, redelivered: bool
    ) -> tuple[StoredJob, Run, Outcome] | None:
        """Read the job, decide, and perform the action; what to record, if anything ran."""
        known = self._known.get(delivery.job)
        for _ in optimistic_attempts():
            stored, decided, now = self._decide(delivery, known, redelivered=redelivered)
            known = None  # after a lost write, the job is read from storage
            if isinstance(decided, Skip):
                log.info("%s: %s", _line(delivery, "nothing to run"), decided.reason)
                return None
            if isinstance(decided, NotYet):
                self._dispatcher.send_again(delivery, now, at_least=LOOK_AGAIN_AFTER)
                return None
            if isinstance(decided, Resend):
                log.info("%s: sending what follows again", _line(delivery, "finished before"))
                self._dispatcher.dispatch(_deliveries(delivery, decided.follow_ups), now)
                return None
            if isinstance(decided, Held):
                log.info(
                    "%s: another delivery holds it until %s",
                    _line(delivery, "not called"),
                    iso(decided.until),
                )
                # Back when the claim runs out: its holder has recorded the try by then, or died.
                self._dispatcher.send_again(
                    delivery, now, at_least=decided.until - now + LOOK_AGAIN_AFTER
                )
                return None
            assert stored is not None
            if isinstance(decided, Park):
                if self._written(
                    stored, self._storage.executor.settle_job(stored, decided.document, [])
                ):
                    log.info("%s: the job or its collection is off", _line(delivery, "not run"))
                    return None
                continue
            claim = Claim(uuid.uuid4().hex, now + CLAIM_FOR)
            if isinstance(decided, Begin):
                # overlapPolicy Allow: the occurrence is counted and the next one sent before
                # the action runs, so that the next starts on time however long this one takes.
                # The claim goes in the same write.
                begun = decided.settlement
                document = begun.document
                if decided.run is not None:
                    document = document.claimed(delivery.pending.attempt, claim)
                written = self._written(
                    stored, self._storage.executor.settle_job(stored, document, begun.history)
                )
                if written is None:
                    continue
                self._dispatcher.dispatch(_deliveries(delivery, begun.follow_ups), now)
                if decided.run is None:
                    log.warning("%s: too many still running", _line(delivery, "skipped"))
                    telemetry().skipped(delivery.job)
                    return None
                stored, decided = written, decided.run
                break
            # Claimed before the call: a delivery racing this one loses the write, reads again,
            # and finds the claim (or the outcome). Its etag serves the outcome's write.
            claimed = stored.document.claimed(decided.delivered, claim)
            written = self._written(stored, self._claims.write(stored, claimed))
            if written is None:
                continue
            stored = written
            break
        else:
            raise _kept_changing(delivery)
        if decided.postponed:
            log.warning(
                "%s: %d postponed; running the latest, %s",
                _line(delivery, "occurrences missed"),
                len(decided.postponed),
                iso(decided.attempt.expected),
            )
            telemetry().postponed(delivery.job, len(decided.postponed))
        with telemetry().step("call target"):
            outcome = self._actions.perform(
                stored.document.properties,
                stored.id,
                decided.attempt,
                region=stored.document.region,
            )
        return stored, decided, outcome

    def _decide(
        self, delivery: Delivery, known: StoredJob | None, *, redelivered: bool
    ) -> tuple[StoredJob | None, Plan, datetime]:
        """The job, what to do with this delivery, and when that was decided: on the job as
        this process last wrote it (`known`) when the decision is a write, which its etag
        checks; otherwise on the job as storage holds it (known_jobs.py)."""
        if known is not None:
            now = self._clock()
            gate = self._gates.state(delivery.job.collection, delivery.pending.due)
            decided = plan(known.document, gate, delivery, now=now, redelivered=redelivered)
            if isinstance(decided, Begin | Park | Run):
                return known, decided, now
        stored = self._storage.jobs.job(delivery.job)
        gate = self._gates.state(delivery.job.collection, delivery.pending.due)
        now = self._clock()
        document = stored.document if stored else None
        return stored, plan(document, gate, delivery, now=now, redelivered=redelivered), now

    def _written(self, stored: StoredJob, written: StoredJob | None) -> StoredJob | None:
        """Keep what a write of `stored` left (None: it lost its race, and the job is read
        again next time)."""
        if written is None:
            self._known.forget(stored.id)
        else:
            self._known.remember(written)
        return written

    def _wait_out(self, delivery: Delivery) -> bool:
        """Sleep until the delivery is due (the fraction of a second the queue cannot wait),
        unless that is more than MOST_EARLY away (False)."""
        wait = time_to_wait(delivery.pending.due, self._clock())
        if wait is None:
            return False
        if wait > timedelta(0):
            self._sleep(wait.total_seconds())
        return True

    def _record(self, delivery: Delivery, stored: StoredJob, run: Run, outcome: Outcome) -> None:
        for _ in optimistic_attempts():
            now = self._clock()
            settlement = settle(stored.document, run, outcome, now, job=delivery.job)
            written = self._storage.executor.settle_job(
                stored, settlement.document, settlement.history
            )
            if self._written(stored, written):
                self._dispatcher.dispatch_gathered(
                    _deliveries(delivery, settlement.follow_ups), self._clock()
                )
                level, line = outcome_line(delivery.job, run.attempt, outcome, settlement, now)
                log.log(level, "%s", line)
                telemetry().executed(delivery, run.attempt, outcome, settlement)
                return
            fresh = self._storage.jobs.job(delivery.job)
            if fresh is None:
                return  # deleted while the action ran: nothing left to record it in
            if not still_pending(fresh.document, delivery):
                # Redefined, or a duplicate of this message finished first: keep what ran.
                self._storage.history.add(fresh.id, settlement.history[-1:])
                return
            stored = fresh
        raise _kept_changing(delivery)

    def _give_up(self, delivery: Delivery, failure: Exception, dequeue_count: int) -> None:
        """Record the attempt as failed, so the job moves on, before the message is poisoned."""
        try:
            stored = self._storage.jobs.job(delivery.job)
            if stored is None or not still_pending(stored.document, delivery):
                return
            now = self._clock()
            message = (
                f"The service failed to execute this attempt {dequeue_count} times and gave up "
                f"({type(failure).__name__}: {str(failure)[:300]})"
            )
            run = abandoned(stored.document, delivery)
            self._record(delivery, stored, run, Outcome(False, now, now, message))
        except Exception:
            log.exception("%s", _line(delivery, "could not record giving up"))


class _UnderWay:
    """How many deliveries are between their due time and the end of their action."""

    def __init__(self) -> None:
        self._count = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def under_way(self) -> Iterator[None]:
        with self._changed:
            self._count += 1
        try:
            yield
        finally:
            with self._changed:
                self._count -= 1
                if self._count == 0:
                    self._changed.notify_all()

    def wait_until_none(self, at_most: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._count == 0, timeout=at_most)


class _SharedGateReads:
    """Collection states, each read once for the jobs of its collection due at one instant.

    Many jobs of a collection often fall due together (every hour on the hour, say). A read made
    at or after their due time answers for all of them, so a change saved before that time is
    always seen; a delivery that comes later than GATE_SHARED_FOR after the read reads again.
    """

    def __init__(
        self, read: Callable[[CollectionId], str | None], clock: Callable[[], datetime]
    ) -> None:
        self._read, self._clock = read, clock
        self._lock = threading.Lock()
        self._reads: dict[tuple[str, datetime], tuple[datetime, Future[str | None]]] = {}

    def state(self, collection: CollectionId, due: datetime) -> str | None:
        now = self._clock()
        if now < due:
            return self._read(collection)  # a read before the due time is for nobody else
        key = (jobs_partition(collection), due)
        with self._lock:
            for stale in [k for k, (at, _) in self._reads.items() if now - at > GATE_SHARED_FOR]:
                del self._reads[stale]
            mine = key not in self._reads
            if mine:
                self._reads[key] = (now, Future())
            reading = self._reads[key][1]
        if mine:
            try:
                reading.set_result(self._read(collection))
            except BaseException as failure:
                with self._lock:
                    self._reads.pop(key, None)  # the next delivery tries for itself
                reading.set_exception(failure)
        return reading.result()


def time_to_wait(due: datetime, now: datetime) -> timedelta | None:
    """How long an attempt due at `due` waits at `now` before it starts: zero once it is due;
    None when it came more than MOST_EARLY early, and goes back on the queue rather than hold a
    worker. The one rule for both waits: the function's, awaited before a message is handled,
    and each delivery's, slept in its thread."""
    early = due - now
    if early > MOST_EARLY:
        return None
    return max(early, timedelta(0))


def _deliveries(delivery: Delivery, pending: Iterable[Pending]) -> list[Delivery]:
    # A claim belongs to the job's document: a message carries only the attempt.
    return [
        Delivery(delivery.job, delivery.defined_at, replace(entry, claim=None)) for entry in pending
    ]


def _kept_changing(delivery: Delivery) -> ModifiedConcurrently:
    """What fails the message (it is delivered again) when every write lost its race."""
    log.warning("%s: the message will be delivered again", _line(delivery, "the job kept changing"))
    return ModifiedConcurrently("job")


def _line(delivery: Delivery, event: str) -> str:
    """`collection/job: {event} (occurrence ..., retry n)`: the delivered attempt, by name."""
    return attempt_line(delivery.job, delivery.pending.attempt, event)
