"""How many run-nows may be in flight at once (docs/behaviour.md#run-now).

A run-now is in flight from the moment it is accepted until its outcome is recorded: it is a
pending attempt of its job. Each holds an executor thread while its action runs and a place in
its job's document, and nothing else limits how often a client asks for one; so a job, and a
collection, take only so many at a time, and the next is refused until one of them ends.
"""

from __future__ import annotations

# A few per job: a run-now is a manual test of the action, and more than this at once of one
# job only contend for its record (each outcome is one etag-checked write of the job).
MOST_PER_JOB = 3
# More per collection, but few enough that one collection's run-nows leave the executor's
# threads to the scheduled occurrences of every other collection.
MOST_PER_COLLECTION = 10


def run_now_refusal(job: str, in_flight_of_job: int, in_flight_in_collection: int) -> str | None:
    """Why one more run-now of `job` is refused, or None when it may go."""
    if in_flight_of_job >= MOST_PER_JOB:
        return (
            f"The job '{job}' already has {in_flight_of_job} run-nows in flight (pending or "
            f"running), the most one job may have ({MOST_PER_JOB}); try again when one has ended."
        )
    if in_flight_in_collection >= MOST_PER_COLLECTION:
        return (
            f"The job collection already has {in_flight_in_collection} run-nows in flight "
            f"(pending or running), the most one collection may have ({MOST_PER_COLLECTION}); "
            "try again when one has ended."
        )
    return None
