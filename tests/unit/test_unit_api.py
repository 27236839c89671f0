"""The REST API handler: validation, idempotent submission, reading, approval and cancellation."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from capacity.adapters import clients
from capacity.errors import ReservationCancelled
from capacity.ledger import Ledger
from capacity.lifecycle import Event
from capacity.record_kinds import APPROVAL, APPROVAL_REFUSED, PURCHASE, SUBMITTED
from capacity.records import State
from capacity.request import parse_request
from capacity.teams import Principals

from tests.ledger_seed import seed
from tests.unit.conftest import REGION
from tests.unit.handler_support import bus_queue, drain, invoke, load_handler, policy_table, team_policy
from tests.unit.unit_fakes import NOW, Clock, FakeTasks, request_body


@pytest.fixture
def api(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str, FakeTasks]]:
    """The api handler, a tap on the bus, and a fake Step Functions task-token port."""
    tasks = FakeTasks()
    monkeypatch.setattr("capacity.adapters.stepfunctions.TaskTokens", lambda client: tasks)
    with time_machine.travel(NOW, tick=False):
        yield load_handler("api"), bus_queue("capacity-orchestrator"), tasks


ALICE = "arn:aws:iam::123456789012:user/alice"
BOB = "arn:aws:iam::123456789012:user/bob"
ADMIN = "arn:aws:sts::123456789012:assumed-role/PlatformAdmins/ada"
STRANGER = "arn:aws:sts::123456789012:assumed-role/OtherTeam/mallory"


@pytest.fixture
def team(monkeypatch: pytest.MonkeyPatch) -> str:
    """A policy table whose team ``ml-eval`` has the users alice and bob as members and approvers (who may
    then see its reservations and decide on them), and ``ADMIN`` as the administrator; the team's name."""
    users = {"iam_principal_arns": ["arn:aws:iam::123456789012:user/*"]}
    policy_table(
        monkeypatch,
        team_policy("ml-eval", members=users, approvers=users),
        admins=Principals(iam_principal_arns=[ADMIN]),
    )
    return "ml-eval"


def proxy(
    method: str, path: str, body: Any = None, *, base64_body: bool = False, caller: str = ALICE
) -> dict[str, Any]:
    """An API Gateway REST proxy event (as ``sam local generate-event apigateway aws-proxy`` shapes it)."""
    text = None if body is None else body if isinstance(body, str) else json.dumps(body)
    encoded = base64_body and text is not None
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json"},
        "multiValueHeaders": {"Content-Type": ["application/json"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": path,
            "httpMethod": method,
            "path": f"/prod{path}",
            "stage": "prod",
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "identity": {"userArn": caller, "sourceIp": "127.0.0.1"},
        },
        "body": base64.b64encode(text.encode()).decode() if encoded and text else text,
        "isBase64Encoded": encoded,
    }


def call(handler: Any, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    response = invoke(handler, proxy(method, path, body, **kwargs))
    return response["statusCode"], json.loads(response["body"])


def test_post_valid_request_is_accepted_and_put_on_the_bus(api: tuple[Any, str, FakeTasks]) -> None:
    handler, tap, _ = api
    status, body = call(handler, "POST", "/reservations", request_body())
    assert status == 202
    assert body == {
        "request_id": "demo-1",
        "status": "REQUESTED",
        "links": {
            "self": "/reservations/demo-1",
            "approval": "/reservations/demo-1/approval",
            "cancel": "/reservations/demo-1",
        },
    }
    (event,) = drain(tap)
    assert event["detail-type"] == "ReservationRequested"
    assert event["detail"]["schema_version"] == 1
    assert event["detail"]["request"]["max_upfront_fee_usd"] == "30000"


def test_same_request_id_twice_gives_the_same_answer_and_one_event(api: tuple[Any, str, FakeTasks]) -> None:
    handler, tap, _ = api
    first = call(handler, "POST", "/reservations", request_body())
    second = call(handler, "POST", "/reservations", request_body(), base64_body=True)
    assert first == second
    assert len(drain(tap)) == 1


def test_invalid_request_is_400_naming_the_field(api: tuple[Any, str, FakeTasks]) -> None:
    handler, tap, _ = api
    status, body = call(handler, "POST", "/reservations", request_body(duration_hours=36, instance_count=3))
    assert status == 400
    fields = {error["field"]: error["message"] for error in body["errors"]}
    assert set(fields) == {"duration_hours", "instance_count"}
    assert "multiple of 24" in fields["duration_hours"]
    assert drain(tap) == []


def test_malformed_json_is_400_on_the_body(api: tuple[Any, str, FakeTasks]) -> None:
    handler, _, _ = api
    status, body = call(handler, "POST", "/reservations", "{not json")
    assert status == 400
    assert body["errors"][0]["field"] == "body"


def test_money_in_json_numbers_is_read_exactly(api: tuple[Any, str, FakeTasks]) -> None:
    handler, tap, _ = api
    text = json.dumps(request_body(max_upfront_fee_usd="__FEE__")).replace('"__FEE__"', "30000.10")
    status, _ = call(handler, "POST", "/reservations", text)
    assert status == 202
    (event,) = drain(tap)
    assert event["detail"]["request"]["max_upfront_fee_usd"] == "30000.10"


def test_get_unknown_is_404_and_known_shows_history(api: tuple[Any, str, FakeTasks]) -> None:
    handler, _, _ = api
    assert call(handler, "GET", "/reservations/nope")[0] == 404
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(parse_request(request_body(requester=ALICE), now=NOW), actor="record_request")
    status, body = call(handler, "GET", "/reservations/demo-1")
    assert status == 200
    assert body["state"] == "REQUESTED"
    assert body["request"]["instance_type"] == "ml.p5.48xlarge"
    assert body["request"]["models"] == ["llama-eu", "llama-us"]
    assert body["history"][0]["at"] == "2026-12-01T09:00:00Z"
    assert body["purchase"] is None


def test_get_reads_the_ledger_in_one_query(api: tuple[Any, str, FakeTasks]) -> None:
    handler, _, _ = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(parse_request(request_body(requester=ALICE), now=NOW), actor="record_request")
    seed(ledger, "demo-1", State.PLANNED, actor="choose_offering")
    queries: list[str] = []
    clients.dynamodb(REGION).meta.events.register(
        "before-call.dynamodb.Query", lambda params, **_: queries.append(str(params.get("body", "")))
    )
    status, body = call(handler, "GET", "/reservations/demo-1")
    assert status == 200
    assert [entry["state"] for entry in body["history"]] == ["REQUESTED", "PLANNED"]
    assert len(queries) == 1, queries  # the items once; the history is read from them


def test_get_of_a_bought_reservation_with_its_spend_is_still_one_read(
    api: tuple[Any, str, FakeTasks],
) -> None:
    handler, _, _ = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(parse_request(request_body(requester=ALICE), now=NOW), actor="record_request")
    ledger.put_once(
        "demo-1",
        PURCHASE,
        {
            "training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/co-demo-1",
            "training_plan_name": "co-demo-1",
            "region": "us-east-1",
            "start_time": "2026-12-01T09:00:00Z",
            "end_time": "2026-12-04T09:00:00Z",
            "upfront_fee_usd": "1990.60",
            "instance_type": "ml.p5.48xlarge",
            "instance_count": 2,
        },
    )
    seed(ledger, "demo-1", State.PURCHASED, actor="purchase_capacity", money_usd=Decimal("1990.60"))
    seed(ledger, "demo-1", State.READY, actor="create_inference_components")
    reads: list[str] = []
    for operation in ("Query", "GetItem", "Scan", "BatchGetItem"):
        clients.dynamodb(REGION).meta.events.register(
            f"before-call.dynamodb.{operation}", lambda params, op=operation, **_: reads.append(op)
        )
    status, body = call(handler, "GET", "/reservations/demo-1")
    assert status == 200
    assert body["purchase"]["upfront_fee_usd"] == "1990.60"
    assert body["spend"]["paid_usd"] == "1990.60"
    assert reads == ["Query"]  # purchase, history, usage and spend all come from the one query


def test_approval_when_not_awaiting_is_409(api: tuple[Any, str, FakeTasks], team: str) -> None:
    handler, _, tasks = api
    Ledger("ledger", clients.dynamodb(REGION), clock=Clock()).record_request(
        parse_request(request_body(team=team), now=NOW), actor="t"
    )
    status, body = call(
        handler, "POST", "/reservations/demo-1/approval", {"approved": True, "approver": "bob"}
    )
    assert status == 409
    assert "not awaiting approval" in body["message"]
    assert tasks.calls == []


def test_approval_sends_the_stored_token(api: tuple[Any, str, FakeTasks], team: str) -> None:
    handler, _, tasks = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(parse_request(request_body(team=team), now=NOW), actor="t")
    ledger.put_once("demo-1", APPROVAL, {"task_token": "token-1"})
    seed(ledger, "demo-1", State.AWAITING_APPROVAL, actor="notify")
    status, body = call(
        handler,
        "POST",
        "/reservations/demo-1/approval",
        {"approved": False, "reason": "too dear"},
        caller=BOB,
    )
    assert (status, body["status"], body["approver"]) == (200, "REJECTED", BOB)
    assert tasks.calls == [
        ("failure", "token-1", {"error": "ApprovalRejected", "cause": f"rejected by {BOB}: too dear"})
    ]


def test_approval_body_is_validated(api: tuple[Any, str, FakeTasks]) -> None:
    handler, _, _ = api
    status, body = call(handler, "POST", "/reservations/demo-1/approval", {"approved": "maybe"})
    assert status == 400
    assert {e["field"] for e in body["errors"]} == {"approved"}  # approver defaults to the IAM caller


def test_delete_cancels_and_requests_release(api: tuple[Any, str, FakeTasks]) -> None:
    handler, tap, _ = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(
        parse_request(request_body(requester=ALICE), now=NOW), actor="t"
    )  # as the API records it
    status, body = call(handler, "DELETE", "/reservations/demo-1")
    assert (status, body["status"]) == (202, "CANCELLED")
    cancelled = ledger.history("demo-1")[-1]
    assert (cancelled.state, cancelled.actor) == (State.CANCELLED, "arn:aws:iam::123456789012:user/alice")
    (event,) = drain(tap)
    assert (event["detail-type"], event["detail"]["reason"]) == ("ReleaseRequested", "cancelled")
    assert call(handler, "DELETE", "/reservations/unknown")[0] == 404


def test_second_approval_decision_is_409_and_answers_nothing(
    api: tuple[Any, str, FakeTasks], team: str
) -> None:
    handler, _, tasks = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(parse_request(request_body(team=team), now=NOW), actor="t")
    ledger.put_once("demo-1", APPROVAL, {"task_token": "token-1"})
    seed(ledger, "demo-1", State.AWAITING_APPROVAL, actor="notify")
    path = "/reservations/demo-1/approval"
    first = call(handler, "POST", path, {"approved": True})
    second = call(handler, "POST", path, {"approved": False}, caller=BOB)
    assert (first[0], first[1]["status"]) == (200, "APPROVED")
    assert second[0] == 409
    assert second[1]["message"].startswith("reservation demo-1 was already approved at ")
    assert second[1]["message"].endswith(f" by {ALICE}")
    assert [call_[0] for call_ in tasks.calls] == ["success"]


def test_same_request_id_with_another_body_is_409_naming_the_request_id(
    api: tuple[Any, str, FakeTasks],
) -> None:
    handler, tap, _ = api
    first = call(handler, "POST", "/reservations", request_body())
    other = call(handler, "POST", "/reservations", request_body(instance_count=4))
    again = call(handler, "POST", "/reservations", request_body())
    assert first[0] == 202
    assert other[0] == 409
    assert other[1]["message"].startswith("request_id 'demo-1' was already submitted with a different body")
    assert again == first
    assert len(drain(tap)) == 1


def test_base64_flag_with_a_body_that_is_not_base64_is_400_on_the_body(
    api: tuple[Any, str, FakeTasks],
) -> None:
    handler, tap, _ = api
    event = proxy("POST", "/reservations", request_body())
    event["isBase64Encoded"] = True
    response = invoke(handler, event)
    assert response["statusCode"] == 400
    (error,) = json.loads(response["body"])["errors"]
    assert error["field"] == "body"
    assert error["message"].startswith("is marked base64-encoded but is not valid base64 UTF-8")
    assert drain(tap) == []


def test_second_delete_puts_no_second_release(api: tuple[Any, str, FakeTasks]) -> None:
    handler, tap, _ = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(
        parse_request(request_body(requester=ALICE), now=NOW), actor="t"
    )  # as the API records it
    first = call(handler, "DELETE", "/reservations/demo-1")
    second = call(handler, "DELETE", "/reservations/demo-1")
    assert (first[0], first[1]["status"]) == (202, "CANCELLED")
    assert (second[0], second[1]["status"]) == (202, "CANCELLED")
    assert [e["detail-type"] for e in drain(tap)] == ["ReleaseRequested"]
    assert [e.state for e in ledger.history("demo-1")] == [State.REQUESTED, State.CANCELLED]


def test_delete_fails_a_token_stored_by_an_approval_step_that_had_not_recorded_its_state_yet(
    api: tuple[Any, str, FakeTasks],
) -> None:
    # The approval step stores its token before it records AWAITING_APPROVAL: a DELETE in between reads
    # PLANNED, and must still answer the waiting task (found by the fault soak, seed 1 lifecycle 176).
    handler, _, tasks = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(
        parse_request(request_body(requester=ALICE), now=NOW), actor="t"
    )  # as the API records it
    seed(ledger, "demo-1", State.PLANNED, actor="choose")
    ledger.put_once("demo-1", APPROVAL, {"task_token": "token-2"})
    assert call(handler, "DELETE", "/reservations/demo-1")[0] == 202
    assert [(kind, token) for kind, token, _ in tasks.calls] == [("failure", "token-2")]
    with pytest.raises(ReservationCancelled, match="is CANCELLED: AWAITING_APPROVAL is not recorded"):
        ledger.record("demo-1", Event.ASK_APPROVAL, actor="notify")
    assert [e.state for e in ledger.history("demo-1")] == [State.REQUESTED, State.PLANNED, State.CANCELLED]


def test_delete_while_awaiting_approval_records_cancelled_then_fails_the_task(
    api: tuple[Any, str, FakeTasks],
) -> None:
    handler, _, tasks = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(
        parse_request(request_body(requester=ALICE), now=NOW), actor="t"
    )  # as the API records it
    ledger.put_once("demo-1", APPROVAL, {"task_token": "token-1"})
    seed(ledger, "demo-1", State.AWAITING_APPROVAL, actor="notify")
    assert call(handler, "DELETE", "/reservations/demo-1")[0] == 202
    assert tasks.calls == [
        (
            "failure",
            "token-1",
            {"error": "ReservationCancelled", "cause": "cancelled by arn:aws:iam::123456789012:user/alice"},
        )
    ]
    assert ledger.history("demo-1")[-1].state is State.CANCELLED


def _awaiting(requester: str, team: str | None = None) -> Ledger:
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    body = request_body(requester=requester) | ({"team": team} if team else {})
    ledger.record_request(parse_request(body, now=NOW), actor="t")
    ledger.put_once("demo-1", APPROVAL, {"task_token": "token-1"})
    seed(ledger, "demo-1", State.AWAITING_APPROVAL, actor="notify")
    return ledger


def test_the_requester_cannot_approve_its_own_request_and_the_refusal_is_recorded(
    api: tuple[Any, str, FakeTasks],
) -> None:
    handler, _, tasks = api
    ledger = _awaiting(ALICE)
    status, body = call(handler, "POST", "/reservations/demo-1/approval", {"approved": True}, caller=ALICE)
    assert status == 403
    assert "requested this reservation and cannot approve" in body["message"]
    assert tasks.calls == []  # nothing handed to the workflow
    (refused,) = ledger.items("demo-1", f"{APPROVAL_REFUSED}#")
    assert (refused["identity"], refused["approved"]) == (ALICE, True)
    assert ledger.get("demo-1", "APPROVAL_DECISION") is None


def test_a_body_naming_another_approver_is_refused(api: tuple[Any, str, FakeTasks], team: str) -> None:
    handler, _, tasks = api
    _awaiting(ALICE, team)
    status, body = call(
        handler,
        "POST",
        "/reservations/demo-1/approval",
        {"approved": True, "approver": "cfo@example.com"},
        caller=BOB,
    )
    assert status == 403
    assert "not 'cfo@example.com'" in body["message"]
    assert tasks.calls == []


def test_the_submitted_requester_is_the_caller_not_the_body(api: tuple[Any, str, FakeTasks]) -> None:
    handler, tap, _ = api
    status, _ = call(handler, "POST", "/reservations", request_body(requester="cfo@example.com"), caller=BOB)
    assert status == 202
    (event,) = drain(tap)
    assert event["detail"]["request"]["requester"] == BOB
    submitted = Ledger("ledger", clients.dynamodb(REGION), clock=Clock()).get("demo-1", "SUBMITTED")
    assert submitted is not None
    assert (submitted["actor"], submitted["requester_as_sent"]) == (BOB, "cfo@example.com")


def test_a_delete_after_a_failed_post_is_recorded_and_a_late_delivery_buys_nothing(
    api: tuple[Any, str, FakeTasks],
) -> None:
    """The POST wrote SUBMITTED, then the bus failed (503): the DELETE's CANCELLED is what GET shows, and the
    event, if AWS took it after all, starts a workflow that records nothing more."""
    handler, _, _ = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.put_once("demo-1", SUBMITTED, {"actor": ALICE, "requester": ALICE, "team": None})
    status, body = call(handler, "DELETE", "/reservations/demo-1")
    assert (status, body["status"]) == (202, "CANCELLED")
    status, shown = call(handler, "GET", "/reservations/demo-1")
    assert (status, shown["state"]) == (200, "CANCELLED")
    with pytest.raises(ReservationCancelled):
        ledger.record_request(parse_request(request_body(), now=NOW), actor="t")
    assert [entry.state for entry in ledger.history("demo-1")] == [State.CANCELLED]


def test_delete_by_someone_who_may_not_cancel_changes_nothing(
    api: tuple[Any, str, FakeTasks], team: str
) -> None:
    """An administrator sees every reservation but cancels none of another team's (403); a caller of
    another team is not told it exists (404, as an unknown id)."""
    handler, tap, _ = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(parse_request(request_body(requester=ALICE, team=team), now=NOW), actor="t")
    status, body = call(handler, "DELETE", "/reservations/demo-1", caller=ADMIN)
    assert status == 403
    assert f"{ADMIN} may not cancel this reservation" in body["message"]
    assert call(handler, "DELETE", "/reservations/demo-1", caller=STRANGER) == (
        404,
        {"message": "no reservation 'demo-1'"},
    )
    assert ledger.current_state("demo-1") is State.REQUESTED
    assert drain(tap) == []
