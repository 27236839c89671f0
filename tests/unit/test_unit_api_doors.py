"""The REST API handler's doors: status codes, friendly errors, the approver's IAM identity, schedules."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
import time_machine
from capacity.adapters import clients
from capacity.ledger import Ledger
from capacity.record_kinds import APPROVAL, APPROVAL_DECISION
from capacity.records import State
from capacity.request import parse_request

from tests.ledger_seed import seed
from tests.unit.conftest import REGION
from tests.unit.handler_support import ROOT, bus_queue, drain, invoke, load_handler, policy_table, team_policy
from tests.unit.unit_fakes import NOW, Clock, FakeTasks, request_body

CALLER = "arn:aws:sts::123456789012:assumed-role/Approvers/carol"


@pytest.fixture
def api(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str, FakeTasks]]:
    """The api handler with a schedule group, a tap on the bus and fake task tokens."""
    tasks = FakeTasks()
    monkeypatch.setattr("capacity.adapters.stepfunctions.TaskTokens", lambda client: tasks)
    monkeypatch.setenv("REQUEST_SCHEDULE_GROUP", "requests")
    monkeypatch.setenv("SCHEDULED_REQUEST_FUNCTION_ARN", f"arn:aws:lambda:{REGION}:123456789012:function:sr")
    monkeypatch.setenv("REQUEST_SCHEDULER_ROLE_ARN", "arn:aws:iam::123456789012:role/request-scheduler")
    boto3.client("scheduler", region_name=REGION).create_schedule_group(Name="requests")
    with time_machine.travel(NOW, tick=False):
        yield load_handler("api"), bus_queue("capacity-orchestrator"), tasks


def event(
    method: str,
    path: str,
    body: Any = None,
    *,
    resource: str | None = None,
    params: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    encoded: bool = False,
) -> dict[str, Any]:
    text = None if body is None else body if isinstance(body, str) else json.dumps(body)
    return {
        "resource": resource or path,
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json"},
        "multiValueHeaders": {"Content-Type": ["application/json"]},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": params,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource or path,
            "httpMethod": method,
            "path": f"/v1{path}",
            "stage": "v1",
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "identity": {"userArn": CALLER, "sourceIp": "127.0.0.1"},
        },
        "body": base64.b64encode(text.encode()).decode() if encoded and text else text,
        "isBase64Encoded": encoded and text is not None,
    }


def send(handler: Any, proxy: dict[str, Any]) -> tuple[int, Any]:
    response = invoke(handler, proxy)
    return response["statusCode"], json.loads(response["body"])


def test_schema_violations_are_400_with_every_field(api: tuple[Any, str, FakeTasks]) -> None:
    handler, tap, _ = api
    status, body = send(
        handler, event("POST", "/reservations", request_body(instance_count="2", regions=[], color="red"))
    )
    assert status == 400
    assert {e["field"] for e in body["errors"]} == {"instance_count", "regions", "color"}
    assert drain(tap) == []


def test_a_start_already_past_is_422_not_400(api: tuple[Any, str, FakeTasks]) -> None:
    handler, tap, _ = api
    past = request_body(earliest_start="2026-11-20T11:30:00Z", latest_end="2026-11-27T11:30:00Z")
    status, body = send(handler, event("POST", "/reservations", past))
    assert status == 422
    assert [e["field"] for e in body["errors"]] == ["earliest_start"]
    assert "in the past" in body["errors"][0]["message"]
    assert drain(tap) == []


def test_a_body_over_64_kib_is_413(api: tuple[Any, str, FakeTasks]) -> None:
    handler, _, _ = api
    status, body = send(handler, event("POST", "/reservations", request_body(requester="x" * 70_000)))
    assert status == 413
    assert body["errors"][0]["field"] == "body"
    assert "65536" in body["errors"][0]["message"]


def test_bad_json_and_bad_base64_are_400(api: tuple[Any, str, FakeTasks]) -> None:
    handler, _, _ = api
    status, body = send(handler, event("POST", "/reservations", '{"requester": '))
    assert (status, body["errors"][0]["field"]) == (400, "body")
    proxy = event("POST", "/reservations", "{}")
    proxy.update(body="%%%not-base64", isBase64Encoded=True)
    status, body = send(handler, proxy)
    assert (status, body["errors"][0]["field"]) == (400, "body")


def test_listing_validates_its_query(api: tuple[Any, str, FakeTasks]) -> None:
    handler, _, _ = api
    status, body = send(handler, event("GET", "/reservations", query={"status": "DONE", "limit": "500"}))
    assert status == 400
    assert {e["field"] for e in body["errors"]} == {"status", "limit"}
    status, body = send(handler, event("GET", "/reservations", query={"next_token": "bm9wZQ"}))
    assert (status, body["errors"][0]["field"]) == (422, "next_token")
    status, body = send(handler, event("GET", "/reservations", query={"status": "READY"}))
    assert (status, body) == (200, {"reservations": [], "next_token": None})


def test_approval_records_the_callers_iam_identity(
    api: tuple[Any, str, FakeTasks], monkeypatch: pytest.MonkeyPatch
) -> None:
    handler, _, tasks = api
    approvers = {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/Approvers/*"]}
    policy_table(monkeypatch, team_policy("ml-eval", approvers=approvers))  # the caller approves for it
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(parse_request(request_body(team="ml-eval"), now=None), actor="tests")
    seed(ledger, "demo-1", State.AWAITING_APPROVAL, actor="tests")
    ledger.put_once("demo-1", APPROVAL, {"task_token": "token-1"})

    status, body = send(
        handler,
        event(
            "POST",
            "/reservations/demo-1/approval",
            {"approved": True},
            resource="/reservations/{request_id}/approval",
            params={"request_id": "demo-1"},
        ),
    )

    assert (status, body) == (
        200,
        {"request_id": "demo-1", "approved": True, "status": "APPROVED", "approver": CALLER},
    )
    decision = ledger.get("demo-1", APPROVAL_DECISION)
    assert decision is not None
    assert (decision["approver"], decision["identity"]) == (CALLER, CALLER)
    assert tasks.calls[0][0] == "success"


def test_path_parameters_are_validated(api: tuple[Any, str, FakeTasks]) -> None:
    handler, _, _ = api
    status, body = send(
        handler,
        event(
            "GET",
            "/reservations/bad id",
            resource="/reservations/{request_id}",
            params={"request_id": "bad id"},
        ),
    )
    assert (status, body["errors"][0]["field"]) == (400, "request_id")


def test_schedules_through_the_handler(api: tuple[Any, str, FakeTasks]) -> None:
    handler, _, _ = api
    template = {
        k: v for k, v in request_body().items() if k not in ("earliest_start", "latest_end", "request_id")
    }
    definition = {
        "name": "weekly-eval",
        "schedule_expression": "cron(30 11 ? * MON *)",
        "timezone": "Europe/Paris",
        "start_after_hours": 24,
        "window_hours": 96,
        "request": template,
    }
    status, created = send(handler, event("POST", "/schedules", definition))
    assert status == 201
    assert created["timezone"] == "Europe/Paris"
    status, body = send(handler, event("POST", "/schedules", definition | {"schedule_expression": "daily"}))
    assert (status, body["errors"][0]["field"]) == (400, "schedule_expression")
    status, body = send(
        handler, event("POST", "/schedules", definition | {"name": "other", "window_hours": 48})
    )
    assert (status, [e["field"] for e in body["errors"]]) == (422, ["window_hours"])
    status, body = send(handler, event("POST", "/schedules", definition))
    assert status == 409
    named = {"resource": "/schedules/{name}", "params": {"name": "weekly-eval"}}
    status, body = send(handler, event("DELETE", "/schedules/weekly-eval", **named))  # type: ignore[arg-type]
    assert (status, body) == (200, {"name": "weekly-eval", "deleted": True})
    status, body = send(handler, event("GET", "/schedules/weekly-eval", **named))  # type: ignore[arg-type]
    assert status == 404


def test_scheduled_request_sample_event_requests_once(aws: None) -> None:
    handler = load_handler("scheduled_request")
    tap = bus_queue("capacity-orchestrator")
    run = json.loads((ROOT / "events" / "functions" / "scheduled_request.json").read_text())

    with time_machine.travel(datetime(2026, 11, 30, 11, 30, 5, tzinfo=UTC), tick=False):
        first = invoke(handler, run)
        again = invoke(handler, run)  # Scheduler delivers at least once
        (event,) = drain(tap)  # in the travel: SQS drops a message older than its retention

    assert first == again == {"request_id": "weekly-eval-2026-11-30", "status": "REQUESTED"}
    request = event["detail"]["request"]
    assert request["request_id"] == "weekly-eval-2026-11-30"
    assert (request["earliest_start"], request["latest_end"]) == (
        "2026-12-01T11:30:00Z",
        "2026-12-05T11:30:00Z",
    )


def test_a_window_starting_now_defaults_to_on_demand_first_through_the_api(
    api: tuple[Any, str, FakeTasks],
) -> None:
    # the schema check has no clock (it would default to reserved); the door defaults at the current time
    handler, tap, _ = api
    soon = request_body(
        request_id="soon-1", earliest_start="2026-12-01T09:30:00Z", latest_end="2026-12-05T09:30:00Z"
    )
    status, body = send(handler, event("POST", "/reservations", soon))
    assert status == 202, body
    (put,) = drain(tap)
    assert put["detail"]["request"]["strategy"] == "on-demand-first"
    status, body = send(
        handler, event("POST", "/reservations", {**soon, "request_id": "soon-2", "strategy": "reserved"})
    )
    assert status == 202, body
    (put,) = drain(tap)
    assert put["detail"]["request"]["strategy"] == "reserved"
