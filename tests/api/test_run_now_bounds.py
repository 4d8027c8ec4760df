"""Run-nows in flight are bounded (docs/behaviour.md#run-now): past the bound a run-now is a 409
in the ARM error format, saying which bound and how many are in flight; once they have ended,
a run-now goes again. Through the local host, against a target that holds its answers."""

from __future__ import annotations

import uuid

import httpx

from shared.domain.run_now import MOST_PER_JOB
from tests.api.test_jobs import in_a_day, job_path, new_collection
from tests.targets import HeldAnswer, Target
from tests.test_service_runs_jobs import history, job_calling


def test_a_run_now_past_the_bound_of_its_job_is_a_409_saying_so(api: httpx.Client, target: Target) -> None:
    collection, name = new_collection(api), f"held-{uuid.uuid4().hex[:8]}"
    held = HeldAnswer()
    target.respond(f"/{name}", held)
    job = job_path(collection, name)
    assert api.put(job, json=job_calling(target, f"/{name}", startTime=in_a_day())).status_code == 201
    try:
        for _ in range(MOST_PER_JOB):
            assert api.post(f"{job}/run").status_code == 200
        refused = api.post(f"{job}/run")
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == {
            "code": "Conflict",
            "message": f"The job '{name}' already has 3 run-nows in flight (pending or running), "
            "the most one job may have (3); try again when one has ended.",
        }
    finally:
        held.release()
    assert len(history(api, collection, name, MOST_PER_JOB)) == MOST_PER_JOB
    assert api.post(f"{job}/run").status_code == 200  # they have ended: the next one goes
