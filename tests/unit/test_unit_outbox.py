"""The outbox (issue 28, point 5): a decision a door records takes effect from its record, whatever happens
to the door's own try; a stream record delivered twice takes effect once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from capacity.adapters.dynamodb import serialize_item
from capacity.errors import NotAwaitingApproval, RetryableAwsError
from capacity.logic.continuity import extension_ask
from capacity.logic.doors import api, serve_until
from capacity.logic.steps import outbox
from capacity.record_kinds import (
    APPROVAL,
    APPROVAL_DELIVERED,
    EXTENSION_APPROVAL,
    EXTENSION_DECISION,
    EXTENSION_OUTCOME,
    EXTENSION_REQUEST,
    OUTCOME,
    PURCHASE,
    RELEASE_REQUEST,
    REQUEST,
    SERVE_UNTIL,
    STATE_PREFIX,
    SUBMITTED,
)
from capacity.records import State
from capacity.request import parse_request
from moto.events.models import EventPattern
from pydantic import BaseModel

from tests.ledger_seed import seed
from tests.unit.conftest import Harness
from tests.unit.unit_fakes import NOW, FakeEvents, FakeTasks, request_body

ALICE = "arn:aws:iam::123456789012:user/alice"
BOB = "arn:aws:iam::123456789012:user/bob"


@dataclass
class FailingEvents(FakeEvents):
    """The bus refuses the first ``failures`` puts (throttled beyond botocore's retries)."""

    failures: int = 0

    def put(self, detail_type: str, detail: BaseModel, *, resources: Sequence[str] = ()) -> str:
        if self.failures > 0:
            self.failures -= 1
            raise RetryableAwsError(f"EventBridge PutEvents {detail_type}: ThrottlingException after retries")
        return super().put(detail_type, detail, resources=resources)


@dataclass
class FailingTasks(FakeTasks):
    """Step Functions refuses the first ``failures`` answers (throttled); ``gone`` tokens no longer wait."""

    failures: int = 0
    gone: set[str] = field(default_factory=set)

    def succeed(self, token: str, output: Any) -> None:
        self._check(token)
        super().succeed(token, output)

    def fail(self, token: str, *, error: str, cause: str) -> None:
        self._check(token)
        super().fail(token, error=error, cause=cause)

    def _check(self, token: str) -> None:
        if token in self.gone:
            raise NotAwaitingApproval("the approval task no longer waits (TaskTimedOut)")
        if self.failures > 0:
            self.failures -= 1
            raise RetryableAwsError("Step Functions SendTaskSuccess: ThrottlingException after retries")


def with_events(harness: Harness, events: FailingEvents) -> FailingEvents:
    harness.ports._events = events
    return events


def with_tasks(harness: Harness, tasks: FailingTasks) -> FailingTasks:
    harness.ports._tasks = tasks
    return tasks


def images(harness: Harness, request_id: str, *prefixes: str) -> list[dict[str, Any]]:
    """The ledger items whose sk starts with one of ``prefixes``, as their stream records carry them."""
    found = [i for i in harness.ledger.items(request_id) if str(i["sk"]).startswith(prefixes)]
    return [serialize_item(item) for item in found]


def recorded(harness: Harness, **overrides: Any) -> str:
    request = parse_request(request_body(requester=ALICE, **overrides), now=NOW)
    harness.ledger.record_request(request, actor="record_request")
    return request.id


def test_a_cancel_whose_release_request_failed_twice_is_released_from_its_record(harness: Harness) -> None:
    events = with_events(harness, FailingEvents(failures=2))
    rid = recorded(harness)
    harness.ledger.put_once(rid, PURCHASE, {"market": "on-demand", "region": "us-east-1"})  # it bills

    first = api.cancel_reservation(rid, harness.ports, actor=ALICE, confirm=True)
    second = api.cancel_reservation(rid, harness.ports, actor=ALICE, confirm=True)  # the client's retry

    assert (first["status"], second["status"]) == ("CANCELLED", "CANCELLED")
    assert events.puts == []  # both tries of the door failed
    result = outbox.carry_out(images(harness, rid, OUTCOME, STATE_PREFIX, RELEASE_REQUEST), harness.ports)
    assert events.types() == ["ReleaseRequested", "ReleaseRequested"]  # the cancel's, the retry's
    assert {detail["reason"] for _, detail in events.puts} == {"cancelled"}
    assert [(c.decision.split("#")[0], c.effect, c.outcome) for c in result.carried] == [
        (OUTCOME, "cancel", "release requested"),
        (RELEASE_REQUEST, "release", "release requested"),
        ("STATE", "cancel", "already"),  # the CANCELLED state: the same decision as its OUTCOME
    ]


def test_a_stream_record_delivered_twice_takes_effect_once(harness: Harness) -> None:
    events = with_events(harness, FailingEvents(failures=1))
    rid = recorded(harness)
    api.cancel_reservation(rid, harness.ports, actor=ALICE)
    batch = images(harness, rid, OUTCOME)

    first = outbox.carry_out(batch, harness.ports)
    again = outbox.carry_out(batch, harness.ports)

    assert events.types() == ["ReleaseRequested"]
    assert [c.outcome for c in first.carried + again.carried] == ["release requested", "already"]
    done = harness.ledger.get(rid, "OUTBOX#CANCELLED")
    assert done is not None
    assert (done["carried_out"], done["decision"]) == ("cancel", OUTCOME)


def test_a_cancel_done_by_the_door_is_not_done_again_by_the_stream(harness: Harness) -> None:
    rid = recorded(harness)
    harness.ledger.put_once(rid, APPROVAL, {"task_token": "token-1"})
    seed(harness.ledger, rid, State.AWAITING_APPROVAL, actor="notify")

    api.cancel_reservation(rid, harness.ports, actor=ALICE)
    result = outbox.carry_out(images(harness, rid, OUTCOME, STATE_PREFIX), harness.ports)

    assert harness.events.types() == ["ReleaseRequested"]
    assert [kind for kind, _, _ in harness.tasks.calls] == ["failure"]
    assert {c.outcome for c in result.carried} == {"already"}


def test_an_approval_whose_hand_back_was_throttled_twice_is_handed_back_from_its_record(
    harness: Harness,
) -> None:
    tasks = with_tasks(harness, FailingTasks(failures=2))
    rid = recorded(harness)
    harness.ledger.put_once(rid, APPROVAL, {"task_token": "token-1"})
    seed(harness.ledger, rid, State.AWAITING_APPROVAL, actor="notify")

    first = api.decide_approval(rid, {"approved": True}, harness.ports, identity=BOB)
    second = api.decide_approval(rid, {"approved": True}, harness.ports, identity=BOB)

    assert (first["status"], second["status"]) == ("APPROVED", "APPROVED")
    assert tasks.calls == []
    assert harness.ledger.get(rid, APPROVAL_DELIVERED) is None
    batch = images(harness, rid, "APPROVAL_DECISION")
    result = outbox.carry_out(batch + batch, harness.ports)  # and seen twice
    assert [(kind, token) for kind, token, _ in tasks.calls] == [("success", "token-1")]
    assert tasks.calls[0][2]["approver"] == BOB
    assert [c.outcome for c in result.carried] == ["approved: handed back", "already"]
    assert harness.ledger.get(rid, APPROVAL_DELIVERED) is not None


def test_an_approval_of_a_task_that_no_longer_waits_is_409_at_the_door_and_closed_by_the_stream(
    harness: Harness,
) -> None:
    tasks = with_tasks(harness, FailingTasks(gone={"token-1"}))
    rid = recorded(harness)
    harness.ledger.put_once(rid, APPROVAL, {"task_token": "token-1"})
    seed(harness.ledger, rid, State.AWAITING_APPROVAL, actor="notify")

    with pytest.raises(NotAwaitingApproval):
        api.decide_approval(rid, {"approved": True}, harness.ports, identity=BOB)
    result = outbox.carry_out(images(harness, rid, "APPROVAL_DECISION"), harness.ports)

    assert tasks.calls == []
    (carried,) = result.carried
    assert carried.outcome.startswith("not handed back: the approval task no longer waits")
    assert harness.ledger.get(rid, APPROVAL_DELIVERED) is None


def test_a_rejected_extension_tells_the_roll_over_once_from_its_record(harness: Harness) -> None:
    events = with_events(harness, FailingEvents(failures=1))
    rid = recorded(harness)
    offering = {
        "offering_id": "tpeo-1",
        "region": "us-east-1",
        "availability_zone": "us-east-1a",
        "start_time": "2026-12-11T11:30:00Z",
        "end_time": "2026-12-12T11:30:00Z",
        "duration_hours": 24,
        "upfront_fee_usd": "700",
    }
    harness.ledger.put_once(rid, f"{EXTENSION_APPROVAL}#tpeo-1", {"requester": ALICE, "offering": offering})
    decision = {"approved": False, "approver": BOB, "reason": "no", outbox.EFFECT: outbox.EXTENSION_DECISION}
    _, stored = harness.ledger.put_once(rid, f"{EXTENSION_DECISION}#tpeo-1", decision)

    assert outbox.attempt(harness.ports, stored) is False  # the door's try: the bus refused
    batch = images(harness, rid, EXTENSION_DECISION)
    outbox.carry_out(batch + batch, harness.ports)

    assert events.types() == ["ExtensionFailed"]
    assert events.puts[0][1]["extension_id"] == "tpeo-1"
    assert harness.ledger.get(rid, f"{EXTENSION_OUTCOME}#tpeo-1")["outcome"] == "rejected"  # type: ignore[index]


def test_an_extension_request_reaches_the_workflow_from_its_record(harness: Harness) -> None:
    rid = recorded(harness)
    offering = {
        "offering_id": "tpeo-2",
        "region": "us-east-1",
        "start_time": "2026-12-11T11:30:00Z",
        "end_time": "2026-12-12T11:30:00Z",
        "duration_hours": 24,
        "upfront_fee_usd": "700",
    }
    asked = {"requester": ALICE, "offering": offering, outbox.EFFECT: outbox.EXTENSION_REQUEST}
    harness.ledger.put_once(rid, f"{EXTENSION_REQUEST}#tpeo-2", asked)

    outbox.carry_out(images(harness, rid, EXTENSION_REQUEST), harness.ports)

    assert harness.events.types() == ["ExtensionRequested"]
    assert harness.events.puts[0][1]["extension_id"] == "tpeo-2"
    assert extension_ask.put_request is not None  # the roll-over's own put stays


def test_a_serve_until_change_re_arms_the_roll_over_from_its_record(harness: Harness) -> None:
    events = with_events(harness, FailingEvents(failures=5))
    rid = recorded(harness)

    answer = serve_until.set_serve_until(
        rid, {"serve_until": "2026-12-20T11:30:00Z"}, harness.ports, actor=ALICE
    )
    assert answer["serve_until"] == "2026-12-20T11:30:00Z"
    assert events.puts == []
    events.failures = 0
    outbox.carry_out(images(harness, rid, f"{SERVE_UNTIL}#"), harness.ports)

    (detail_type, detail), *_ = events.puts
    assert detail_type == "ServeUntilChanged"
    assert (detail["request_id"], detail["serve_until"], detail["actor"]) == (
        rid,
        "2026-12-20T11:30:00Z",
        ALICE,
    )


def test_an_accepted_request_reaches_its_workflow_from_its_record_once(harness: Harness) -> None:
    events = with_events(harness, FailingEvents(failures=1))
    answer = api.submit_reservation(request_body(), harness.ports, persistence=None, requester=ALICE)
    assert answer["status"] == "REQUESTED"
    assert events.puts == []
    batch = images(harness, "demo-1", SUBMITTED)

    outbox.carry_out(batch + batch, harness.ports)

    assert events.types() == ["ReservationRequested"]
    assert events.puts[0][1]["request"]["request_id"] == "demo-1"


def test_a_request_its_workflow_already_recorded_is_not_requested_again(harness: Harness) -> None:
    events = with_events(harness, FailingEvents(failures=1))
    api.submit_reservation(request_body(), harness.ports, persistence=None, requester=ALICE)
    harness.ledger.record_request(parse_request(request_body(requester=ALICE), now=NOW), actor="record")

    result = outbox.carry_out(images(harness, "demo-1", SUBMITTED), harness.ports)

    assert events.puts == []
    assert result.carried[0].outcome == "already recorded by its workflow"
    assert harness.ledger.get("demo-1", REQUEST) is not None


def _record(item: dict[str, Any], event_name: str = "INSERT") -> dict[str, Any]:
    keys = {"request_id": {"S": item["request_id"]}, "sk": {"S": item["sk"]}}
    return {"eventName": event_name, "dynamodb": {"Keys": keys, "NewImage": serialize_item(item)}}


def _matches(record: dict[str, Any]) -> bool:
    return any(EventPattern.load(json.dumps(p)).matches_event(record) for p in outbox.FILTERS)  # type: ignore[arg-type]


def test_the_filters_let_through_the_decisions_and_nothing_else() -> None:
    cancel = {"reason": "cancelled"}
    decisions: list[dict[str, Any]] = [
        {"request_id": "r", "sk": OUTCOME, "outcome": "CANCELLED", "detail": cancel},
        {
            "request_id": "r",
            "sk": "STATE#2026-12-01T09:00:00.000Z#0000",
            "state": "CANCELLED",
            "detail": cancel,
        },
        {"request_id": "r", "sk": "APPROVAL_DECISION", "approved": True, "effect": "hand-back"},
        {"request_id": "r", "sk": "SERVE_UNTIL#t#0000", "effect": "serve-until", "rollover_lead_hours": 24},
    ]
    others: list[dict[str, Any]] = [
        {"request_id": "r", "sk": OUTCOME, "outcome": "FAILED", "detail": {"reason": "x"}},
        {"request_id": "r", "sk": OUTCOME, "outcome": "CANCELLED", "detail": {"reason": "not-needed"}},
        {"request_id": "r", "sk": "STATE#t#0000", "state": "REQUESTED", "detail": {}},
        {
            "request_id": "r",
            "sk": "OUTBOX#CANCELLED",
            "carried_out": "cancel",
            "outcome": "release requested",
        },
        {"request_id": "r", "sk": "CURRENT", "current_state": "CANCELLED", "state_sk": "STATE#t#0000"},
        {"request_id": "r", "sk": "APPROVAL", "task_token": "t"},
    ]
    assert [_matches(_record(item)) for item in decisions] == [True] * len(decisions)
    assert [_matches(_record(item)) for item in others] == [False] * len(others)
    assert not _matches(_record(decisions[2], "MODIFY"))
    assert [outbox.effect_of(item) for item in decisions] == ["cancel", "cancel", "hand-back", "serve-until"]
    assert {outbox.effect_of(item) for item in others} == {None}
