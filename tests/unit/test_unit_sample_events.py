"""Every sample event in events/ is a valid input of its function (the gate in tests/gates/ wants each one
named by a test: this table is where a new function's events go).

The function inputs name reservation ``eval-week-49``, which the empty unit ledger does not hold, so a step
answers ``ReservationNotFound`` or ``PlanFailed`` (no such plan), or does its work when it needs no
reservation; what must never happen is
``InvalidRequest``, the error of an input that does not match the function's contract. Each event with a
required field removed must fail with ``InvalidRequest``, which shows the check can tell the two apart.
The event-driven functions (scheduled_request, capacity_block_events, scale_components), the API routes
and the signed Slack requests are checked for the answer they give on that empty state.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import time_machine
from capacity import TAG_REQUEST_ID
from capacity.errors import CapacityError, InvalidRequest
from capacity.resources import CapacityReservation

from events.slack_signed_request import local_secret
from tests.unit.handler_support import LambdaContext, bus_queue, drain, invoke, load_handler
from tests.unit.unit_fakes import NOW, World

ROOT = Path(__file__).resolve().parents[2]

STEP_EVENTS: list[tuple[str, str, str]] = [
    # (function, sample event, a required field of its input)
    ("record_request", "events/functions/record_request.json", "detail"),
    ("search_offerings", "events/functions/search_offerings.json", "region"),
    ("choose_offering", "events/functions/choose_offering.json", "request_id"),
    ("notify", "events/functions/notify.json", "kind"),
    ("purchase_capacity", "events/functions/purchase_capacity.json", "request_id"),
    ("wait_for_activation", "events/functions/wait_for_activation.json", "request_id"),
    ("create_endpoint", "events/functions/create_endpoint.json", "request_id"),
    ("create_inference_components", "events/functions/create_inference_components.json", "request_id"),
    ("release_capacity", "events/functions/release_capacity.json", "request_id"),
    ("launch_instances", "events/functions/launch_instances.json", "request_id"),
    ("on_demand", "events/functions/on_demand.json", "request_id"),
    ("extend_capacity", "events/functions/extend_capacity.json", "kind"),
]

DOMAIN_ANSWERS = {"ReservationNotFound", "PlanFailed"}
"""What a step may answer about ``eval-week-49`` on an empty ledger and an empty SageMaker."""

API_EVENTS: list[tuple[str, set[int]]] = [
    # (API Gateway proxy event, the statuses it may get from an empty ledger)
    ("events/api_post_reservation.json", {202}),
    ("events/api_post_reservation_needs_approval.json", {202}),
    ("events/api_get_reservation.json", {404}),
    ("events/api_post_approval.json", {404}),
    ("events/api_delete_reservation.json", {404}),
    ("events/api_list_reservations.json", {200}),
]

API_DOOR_EVENTS: list[tuple[str, set[int]]] = [
    # the routes that need the request schedule group or a SageMaker search (empty, fake)
    ("events/api_post_plan.json", {200}),
    ("events/api_post_schedule.json", {201}),
    ("events/api_get_schedule.json", {404}),
    ("events/api_list_schedules.json", {200}),
    ("events/api_delete_schedule.json", {404}),
]

SLACK_EVENTS: list[tuple[str, str]] = [
    # (signed Slack request, a phrase of the answer Slack shows); all are answered 200 once verified
    ("events/slack_command_help.json", "/gpu reserve"),
    ("events/slack_command_reserve.json", "Reservation `slack-week-49` requested"),
    ("events/slack_command_status.json", "no reservation 'slack-week-49'"),  # the ledger is empty
    ("events/slack_interaction_approve.json", "slack-week-49: no reservation 'slack-week-49'"),
    ("events/slack_interaction_approve_not_approver.json", "only approvers may approve or reject"),
]


@pytest.fixture
def fake_sagemaker(aws: None, monkeypatch: pytest.MonkeyPatch) -> World:
    """A fake SageMaker behind ``Ports`` (moto has no training plans)."""
    world = World()
    monkeypatch.setattr("capacity.adapters.sagemaker.SageMakerAdapter", world.client)
    return world


def _answer(handler: Any, event: dict[str, Any]) -> str:
    """``ok`` when the handler returned, else the name of the domain error it raised."""
    try:
        invoke(handler, event)
    except CapacityError as exc:  # a domain answer (no such reservation or plan): the input was understood
        return type(exc).__name__
    return "ok"


def _event(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / path).read_text())
    return loaded


def _at_its_time(event: dict[str, Any]) -> time_machine.travel:
    """The clock at the instant the event says it was sent (as ``localcloud run`` starts), else at the unit
    fakes' ``NOW``: the samples carry fixed dates, and a door refuses a window already past."""
    epoch = (event.get("requestContext") or {}).get("requestTimeEpoch")
    when = datetime.fromtimestamp(epoch / 1000, UTC) if epoch else NOW
    return time_machine.travel(when, tick=False)


@pytest.mark.usefixtures("fake_sagemaker")
@pytest.mark.parametrize(("function", "path", "required"), STEP_EVENTS)
def test_step_sample_event_matches_the_function_contract(function: str, path: str, required: str) -> None:
    handler = load_handler(function)
    event = _event(path)
    with _at_its_time(event):
        answer = _answer(handler, event)
        assert answer not in ("InvalidRequest", None), f"{path} is not a valid {function} input"
        assert answer in DOMAIN_ANSWERS | {"ok"}, f"{path}: {answer}"

        broken = {key: value for key, value in event.items() if key != required}
        with pytest.raises(InvalidRequest, match=required):
            invoke(handler, broken)


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(("path", "statuses"), API_EVENTS)
def test_api_sample_event_is_routed_and_accepted(path: str, statuses: set[int]) -> None:
    handler = load_handler("api")
    event = _event(path)
    with _at_its_time(event):
        response = invoke(handler, event)
    assert response["statusCode"] in statuses, response


@pytest.fixture
def schedule_env(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The request schedule group and the variables the schedule routes need."""
    monkeypatch.setenv("REQUEST_SCHEDULE_GROUP", "requests")
    monkeypatch.setenv("SCHEDULED_REQUEST_FUNCTION_ARN", "arn:aws:lambda:us-east-1:123456789012:function:sr")
    monkeypatch.setenv("REQUEST_SCHEDULER_ROLE_ARN", "arn:aws:iam::123456789012:role/request-scheduler")
    boto3.client("scheduler", region_name="us-east-1").create_schedule_group(Name="requests")


@pytest.mark.usefixtures("fake_sagemaker", "schedule_env")
@pytest.mark.parametrize(("path", "statuses"), API_DOOR_EVENTS)
def test_api_schedule_and_plan_sample_events_are_answered(path: str, statuses: set[int]) -> None:
    handler = load_handler("api")
    with time_machine.travel(NOW, tick=False):  # POST /plans searches a window after now
        response = invoke(handler, _event(path))
    assert response["statusCode"] in statuses, response
    body = json.loads(response["body"])
    if path.endswith("post_plan.json"):  # nothing on the empty fake market: a dry run, never a purchase
        assert body["decision"] == "NO_OFFERING"
    if path.endswith("post_schedule.json"):
        assert (body["name"], body["state"]) == ("weekly-eval", "ENABLED")


@pytest.mark.usefixtures("aws")
def test_scheduled_request_sample_event_puts_its_request() -> None:
    handler = load_handler("scheduled_request")
    event = _event("events/functions/scheduled_request.json")
    with time_machine.travel(event["scheduled_time"], tick=False):
        assert invoke(handler, event) == {"request_id": "weekly-eval-2026-11-30", "status": "REQUESTED"}
        with pytest.raises(InvalidRequest, match="schedule"):
            invoke(handler, {k: v for k, v in event.items() if k != "schedule"})


class _Blocks:
    """An EC2 port holding one capacity block, tagged with ``request_id`` (or untagged for None)."""

    def __init__(self, request_id: str | None) -> None:
        self.tags = {TAG_REQUEST_ID: request_id} if request_id else {}

    def __call__(self, region: str, *_clients: Any) -> _Blocks:
        return self

    def describe_capacity_reservation(self, reservation_id: str) -> CapacityReservation:
        return CapacityReservation(
            reservation_id=reservation_id,
            arn=f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{reservation_id}",
            state="active",
            instance_type="p5.48xlarge",
            availability_zone="us-east-1a",
            total_instance_count=2,
            available_instance_count=0,
            start_time=None,
            end_time=None,
            tags=self.tags,
        )


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("owner", ["train-week-49-ec2", None])
def test_capacity_block_expiration_warning_sample_event_releases_only_our_block(
    owner: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("capacity.adapters.ec2.Ec2Adapter", _Blocks(owner))  # moto has no capacity blocks
    tap = bus_queue("capacity-orchestrator")
    handler = load_handler("capacity_block_events")
    result = invoke(handler, _event("events/functions/capacity_block_events.json"))
    assert result == {"request_id": owner, "released": owner is not None}
    put = [(e["detail-type"], e["detail"]["request_id"]) for e in drain(tap)]
    assert put == ([("ReleaseRequested", owner)] if owner else [])


@pytest.mark.usefixtures("aws")
def test_alarm_sample_event_of_an_unknown_alarm_is_ignored_and_says_why() -> None:
    handler = load_handler("scale_components")
    result = invoke(handler, _event("events/functions/scale_components.json"))
    assert (result["action"], result["request_id"], result["to_copies"]) == ("ignored", None, None)
    assert "carries no matching capacity-orchestrator:request-id tag" in result["reason"]


@pytest.mark.usefixtures("aws")
def test_rollover_due_sample_event_of_an_unknown_reservation_does_nothing_and_says_so() -> None:
    handler = load_handler("roll_over")
    result = invoke(handler, _event("events/functions/roll_over.json"))
    (handled,) = result["handled"]
    assert handled == {
        "request_id": "eval-week-49",
        "action": "none",
        "detail": "no such reservation",
        "next_check": None,
    }


@pytest.mark.usefixtures("aws")
def test_outbox_sample_event_requests_the_cancelled_reservation_s_release_once() -> None:
    tap = bus_queue("capacity-orchestrator")
    handler = load_handler("outbox")
    first = invoke(handler, _event("events/functions/outbox.json"))
    again = invoke(handler, _event("events/functions/outbox.json"))  # Lambda reads a stream at least once
    assert first["carried"] == [
        {
            "request_id": "eval-week-49",
            "decision": "OUTCOME",
            "effect": "cancel",
            "outcome": "release requested",
        }
    ]
    assert again["carried"][0]["outcome"] == "already"
    put = [(e["detail-type"], e["detail"]["request_id"], e["detail"]["reason"]) for e in drain(tap)]
    assert put == [("ReleaseRequested", "eval-week-49", "cancelled")]


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(("path", "phrase"), SLACK_EVENTS)
def test_slack_sample_event_is_verified_and_answered(
    path: str, phrase: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = boto3.client("secretsmanager", region_name="us-east-1")
    arn = secrets.create_secret(Name="signing", SecretString=json.dumps({"signing_secret": local_secret()}))
    monkeypatch.setenv("SLACK_SIGNING_SECRET_ARN", arn["ARN"])
    monkeypatch.setenv("SLACK_APPROVER_IDS", "U0APPROVER")
    sent: list[str] = []
    monkeypatch.setattr("capacity.adapters.slack.WebhookClient", lambda url: _Webhook(url, sent))
    handler = load_handler("slack")
    event = _event(path)
    signed_at = int(event["headers"]["X-Slack-Request-Timestamp"])
    with time_machine.travel(signed_at, tick=False):
        answer = handler.lambda_handler(event, LambdaContext())
    assert answer["statusCode"] == 200, answer
    # a command is answered in the body; a button press through its response_url
    shown = [json.loads(answer["body"]).get("text", ""), *sent]
    assert any(phrase in text for text in shown), shown


class _Webhook:
    """slack_sdk's WebhookClient for a response_url: records the text, answers 200 (no network)."""

    def __init__(self, url: str, sent: list[str]) -> None:
        assert url.startswith("https://hooks.slack.com/")
        self.sent = sent

    def send(self, *, text: str, **_: Any) -> Any:
        self.sent.append(text)
        return type("Answer", (), {"status_code": 200})()
