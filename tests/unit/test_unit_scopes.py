"""Issue 13, defect 13 (part): a request naming a model bucket the deployment does not allow is refused
with a 400 naming the field at every door, before anything is put on the bus or bought."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import time_machine
from capacity.errors import OutOfScope
from capacity.logic.steps.intake import record_request
from capacity.settings import Settings

from tests.unit.conftest import Harness
from tests.unit.handler_support import bus_queue, drain, invoke, load_handler
from tests.unit.test_unit_api import proxy
from tests.unit.unit_fakes import NOW, request_body

OUTSIDE = "s3://someone-elses-bucket/llama/model.tar.gz"


@pytest.fixture
def api(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    monkeypatch.setenv("MODEL_ARTIFACT_BUCKETS", "models,example-models")
    monkeypatch.setenv("INSTANCE_ROLE_ARNS", "")
    with time_machine.travel(NOW, tick=False):
        yield load_handler("api"), bus_queue("capacity-orchestrator")


def _outside(**overrides: Any) -> dict[str, Any]:
    body = request_body(**overrides)
    body["models"][0]["model_data_url"] = OUTSIDE
    return body


@pytest.mark.parametrize("path", ["/reservations", "/plans"])
def test_a_model_artifact_outside_the_allowed_buckets_is_400_naming_the_field(
    api: tuple[Any, str], path: str
) -> None:
    handler, tap = api
    response = invoke(handler, proxy("POST", path, _outside()))
    assert response["statusCode"] == 400
    (error,) = json.loads(response["body"])["errors"]
    assert error["field"] == "models.0.model_data_url"
    assert "someone-elses-bucket" in error["message"]
    assert "example-models, models" in error["message"]
    assert drain(tap) == []


def test_a_schedule_whose_template_reads_another_bucket_is_400(api: tuple[Any, str]) -> None:
    handler, _ = api
    template = {
        k: v for k, v in _outside().items() if k not in ("request_id", "earliest_start", "latest_end")
    }
    definition = {
        "name": "weekly",
        "schedule_expression": "rate(7 days)",
        "timezone": "UTC",
        "request": template,
    }
    response = invoke(handler, proxy("POST", "/schedules", definition))
    assert response["statusCode"] == 400
    assert json.loads(response["body"])["errors"][0]["field"] == "request.models.0.model_data_url"


def test_an_allowed_bucket_is_accepted(api: tuple[Any, str]) -> None:
    handler, tap = api
    response = invoke(handler, proxy("POST", "/reservations", request_body()))  # s3://models/...
    assert response["statusCode"] == 202
    assert len(drain(tap)) == 1


def test_a_forged_event_naming_another_bucket_records_nothing(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODEL_ARTIFACT_BUCKETS", "")  # the template's default: no bucket at all
    harness.ports.settings = Settings.from_env()
    event = {"id": "event-1", "detail": {"schema_version": 1, "request": request_body()}}
    with pytest.raises(OutOfScope) as refused:
        record_request(event, harness.ports)
    assert [e.field for e in refused.value.errors] == ["request.models.0.model_data_url"]
    assert "(ModelArtifactBuckets: none)" in refused.value.errors[0].message
    assert harness.ledger.items("demo-1") == []
