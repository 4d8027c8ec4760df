"""A job is validated where it enters (the API, an import) and where it is read from storage,
not again while it runs: the executor reads the typed job it was given (issue 45)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from tests.execution.test_pipeline import http, job_at
from tests.in_memory import MemoryPipeline
from tests.pipeline import Pipeline
from tests.targets import Target

# The parts of a job that the executor rebuilt from the stored JSON on every run.
PARTS = {"Recurrence", "RetryPolicy", "Action", "ErrorAction"}


@pytest.fixture
def pipeline() -> Pipeline:
    return MemoryPipeline()


def validations_while(run: Any, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The models validated (by name) through `model_validate` while `run()` runs."""
    counted: Counter[str] = Counter()
    validate = BaseModel.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls: type[BaseModel], *args: Any, **kwargs: Any) -> Any:
        counted[cls.__name__] += 1
        return validate(cls, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(BaseModel, "model_validate", classmethod(counting))
        run()
    return counted


def test_running_a_job_validates_none_of_its_parts_again(
    pipeline: Pipeline, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    target.answer("/edges", 503)
    target.answer("/edges-alarm", 200)
    action = http(target, "/edges") | {
        "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT20S", "retryCount": 1},
        "errorAction": http(target, "/edges-alarm"),
    }
    recurrence = {"frequency": "Minute", "interval": 1, "count": 2}
    pipeline.put_job("edges", job_at(target, "/edges", action=action, recurrence=recurrence))

    def run() -> None:
        for _ in range(4):
            pipeline.advance(timedelta(seconds=30))

    counted = validations_while(run, monkeypatch)
    assert len(target.received("/edges")) >= 2  # it ran, and retried
    assert not PARTS & set(counted), counted
