"""``python -m localcloud run`` with what a user has: a plain request (JSON or YAML), wrapped as API Gateway
would; fault files as written in events/."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from localcloud.cli import event_kind, load_event, main
from localcloud.faults import FaultInjector
from localcloud.proxy import plain_route, proxy_event
from localcloud.template import ApiRoute

ROOT = Path(__file__).resolve().parents[3]
REQUEST = ROOT / "events" / "reservation_request.json"
ROUTES = [
    ApiRoute("POST", "/reservations", "ApiFunction", "Api", "a1b2c3d4e5", "v1", "AWS_IAM"),
    ApiRoute("DELETE", "/reservations/{request_id}", "ApiFunction", "Api", "a1b2c3d4e5", "v1", "AWS_IAM"),
]
NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_the_yaml_sample_is_the_json_sample() -> None:
    assert load_event(ROOT / "events" / "reservation_request.yaml") == json.loads(REQUEST.read_text())


def test_plain_bodies_are_recognised() -> None:
    body = json.loads(REQUEST.read_text())
    schedule = json.loads((ROOT / "events" / "schedule_request.json").read_text())

    assert event_kind(body) == "request"
    assert plain_route(body) == ("POST", "/reservations")
    assert plain_route(schedule) == ("POST", "/schedules")
    assert plain_route({"httpMethod": "POST", "path": "/reservations"}) is None


def test_a_plain_body_is_wrapped_as_api_gateway_sends_it() -> None:
    body = json.loads(REQUEST.read_text())
    caller = "arn:aws:sts::123456789012:assumed-role/MlPlatform/ml-platform"

    event = proxy_event(
        method="POST", path="/reservations", body=body, routes=ROUTES, account_id="123456789012", now=NOW,
        identity=caller,
    )  # fmt: skip

    assert (event["resource"], event["httpMethod"], event["isBase64Encoded"]) == (
        "/reservations",
        "POST",
        False,
    )
    assert json.loads(event["body"]) == body  # the escaped JSON string nobody should write by hand
    assert event["headers"]["Content-Type"] == "application/json"
    assert event["requestContext"]["identity"]["userArn"] == caller
    assert event["requestContext"]["requestTimeEpoch"] == int(NOW.timestamp() * 1000)
    deleting = proxy_event(
        method="DELETE", path="/reservations/eval-week-49", routes=ROUTES, account_id="1", now=NOW
    )
    assert deleting["pathParameters"] == {"request_id": "eval-week-49"}
    assert "userArn" not in deleting["requestContext"]["identity"]


def test_run_sends_a_plain_request_to_the_api(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["run", str(ROOT / "events" / "reservation_request.yaml"), "--plan"])
    out = capsys.readouterr().out

    assert status == 0
    assert "virtual start 2026-12-01T08:00:00Z" in out  # a plain request has no time of its own
    assert 'POST /plans -> 200 {"request_id":"eval-week-49","decision":"DRY_RUN"' in out


def test_every_fault_file_in_events_loads() -> None:
    files = sorted((ROOT / "events").glob("faults_*.json"))

    assert files, "the README's faults example names a file in events/"
    for path in files:
        assert FaultInjector.from_file(path).rules  # an object with its rules, beside a description
