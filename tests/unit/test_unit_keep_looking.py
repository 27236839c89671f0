"""Keep looking until a deadline (issue 17 item 4, issue 31 item 4) with fakes: the choose step's SEARCH_AGAIN
every interval, SEARCHING at the first look and when the answer changes (not at every look), the deadline's
outcome, a dry run's next look, the wait's token, a cancel that ends the wait, and the name of the execution
the workflow continues in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from capacity.contracts.finding import ChooseInput, SearchInput, SearchOutput
from capacity.contracts.notify import NotifyInput
from capacity.errors import ReservationCancelled
from capacity.logic.continuity.keep_looking import may_look_again, successor_name
from capacity.logic.doors.api import cancel_reservation
from capacity.logic.steps.choose import choose_offering
from capacity.logic.steps.notify import notify
from capacity.logic.steps.plans import plan_reservation
from capacity.logic.steps.search import search_offerings
from capacity.planner import Decision, Plan
from capacity.records import State
from capacity.request import ReservationRequest, parse_request
from capacity.search_schedule import look_instants, looks_per_execution

from tests.unit.conftest import Harness
from tests.unit.unit_fakes import NOW, raw_offering, request_body

DEADLINE = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)  # four days after NOW


def record(h: Harness, **overrides: Any) -> ReservationRequest:
    body = request_body(search_until="2026-12-05T09:00:00Z", **overrides)
    request = parse_request(body, now=NOW)
    h.ledger.record_request(request, actor="test")
    return request


def look(h: Harness, request: ReservationRequest, number: int) -> Any:
    searches: list[SearchOutput] = [
        search_offerings(SearchInput(request_id=request.id, region=r, look=number), h.ports)
        for r in request.regions
    ]
    return choose_offering(ChooseInput(request_id=request.id, searches=searches, look=number), h.ports)


def states(h: Harness, request_id: str = "demo-1") -> list[State]:
    return [e.state for e in h.ledger.history(request_id)]


def test_nothing_now_searches_again_after_the_interval_and_records_searching_once(
    harness: Harness,
) -> None:
    request = record(harness)
    out = look(harness, request, 0)
    assert out.decision == "SEARCH_AGAIN"
    assert (out.look, out.next_look, out.offering) == (0, 1, None)
    assert out.next_look_at == NOW + timedelta(minutes=15)  # the default interval
    assert out.wait_seconds == 900
    assert out.continue_as is None
    entry = harness.ledger.history(request.id)[-1]
    assert entry.state is State.SEARCHING
    assert entry.detail["next_look_at"] == "2026-12-01T09:15:00Z"
    assert entry.detail["search_until"] == "2026-12-05T09:00:00Z"
    assert entry.detail["every_minutes"] == 15
    assert (entry.detail["looks_left"], entry.detail["decision"]) == (4 * 96, "NO_OFFERING")
    assert [t for t in harness.slack.texts() if "Still looking for demo-1" in t]
    assert harness.events.types() == []  # nothing is failed or planned yet
    # A retried step (the same look) records nothing twice and tells nobody again.
    look(harness, request, 0)
    assert states(harness) == [State.REQUESTED, State.SEARCHING]
    assert len([t for t in harness.slack.texts() if "Still looking" in t]) == 1


def test_an_offering_found_at_a_later_look_is_planned_from_that_looks_offerings(
    harness: Harness,
) -> None:
    request = record(harness)
    assert look(harness, request, 0).decision == "SEARCH_AGAIN"
    harness.clock.now = NOW + timedelta(hours=1)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-late", fee="8000"))
    out = look(harness, request, 1)
    assert out.decision == "PURCHASE"
    assert out.offering is not None
    assert out.offering.offering_id == "tpo-late"
    assert states(harness) == [State.REQUESTED, State.SEARCHING, State.PLANNED]
    # An offering of an earlier look that is gone since is never chosen by a later look.
    assert {o.offering_id for o in harness.ports.offerings.list(request.id, look=0)} == set()
    assert {o.offering_id for o in harness.ports.offerings.list(request.id, look=1)} == {"tpo-late"}


def test_over_budget_keeps_looking_and_a_cheaper_offering_later_is_bought(harness: Harness) -> None:
    request = record(harness, max_upfront_fee_usd="9000")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-dear", fee="12000"))
    first = look(harness, request, 0)
    assert first.decision == "SEARCH_AGAIN"
    assert "above the budget" in first.reason
    harness.world.offerings.clear()
    harness.world.add_offerings("us-east-1", raw_offering("tpo-cheap", fee="8500"))
    harness.clock.now = first.next_look_at
    second = look(harness, request, 1)
    assert (second.decision, second.offering.offering_id if second.offering else None) == (
        "PURCHASE",
        "tpo-cheap",
    )
    assert State.REJECTED not in states(harness)


def test_looks_that_find_what_the_last_one_found_record_nothing_and_a_change_is_recorded(
    harness: Harness,
) -> None:
    request = record(harness, max_upfront_fee_usd="9000")
    first = look(harness, request, 0)
    for number in range(1, 6):  # nothing, every time: the history stays as it was after the first look
        harness.clock.now = first.next_look_at + timedelta(minutes=15 * (number - 1))
        assert look(harness, request, number).decision == "SEARCH_AGAIN"
    assert states(harness) == [State.REQUESTED, State.SEARCHING]
    harness.world.add_offerings("us-east-1", raw_offering("tpo-dear", fee="12000"))
    harness.clock.now += timedelta(minutes=15)
    dear = look(harness, request, 6)
    assert dear.decision == "SEARCH_AGAIN"
    assert "above the budget" in dear.reason
    looked = [e for e in harness.ledger.history(request.id) if e.state is State.SEARCHING]
    assert [(e.detail["look"], e.detail["decision"]) for e in looked] == [(0, "NO_OFFERING"), (6, "REJECTED")]
    assert looked[1].detail["since"] == looked[0].detail["since"] == "2026-12-01T09:00:00Z"
    look(harness, request, 6)  # the same look retried: nothing twice
    assert states(harness).count(State.SEARCHING) == 2
    assert len([t for t in harness.slack.texts() if "Still looking" in t]) == 1  # told once


def test_every_few_hundred_looks_the_next_one_runs_in_a_fresh_execution_named_once(harness: Harness) -> None:
    request = record(harness)
    per = looks_per_execution(len(request.regions))
    harness.clock.now = NOW + timedelta(hours=2)
    assert look(harness, request, per - 2).continue_as is None
    out = look(harness, request, per - 1)
    assert (
        out.continue_as == successor_name(request, per) == "demo-1-" + out.continue_as.split("-")[2] + "-g1"
    )
    assert successor_name(request, 2 * per) is not None
    assert successor_name(request, 2 * per).endswith("-g2")  # type: ignore[union-attr]
    assert successor_name(request, per + 1) is None
    # Execution names allow letters, digits, '-' and '_' (80 at most): ids that differ in '.' or ':' differ.
    dotted = request.model_copy(update={"request_id": "a" * 60 + ".b"})
    coloned = request.model_copy(update={"request_id": "a" * 60 + ":b"})
    names = {successor_name(dotted, per), successor_name(coloned, per)}
    assert len(names) == 2
    assert all(n is not None and len(n) <= 80 and n.replace("-", "").isalnum() for n in names)


def test_at_the_deadline_nothing_found_fails_with_a_dedicated_error_told_to_the_requester(
    harness: Harness,
) -> None:
    request = record(harness, search_every_minutes=600)
    instants = look_instants(NOW, DEADLINE, 600)
    out = look(harness, request, 0)
    for number, instant in enumerate(instants, start=1):
        harness.clock.now = instant
        out = look(harness, request, number)
        if instant != DEADLINE:
            assert out.decision == "SEARCH_AGAIN"
            assert out.next_look_at == instants[number]
    assert out.decision == "NO_OFFERING"
    assert out.next_look_at is None
    seen = states(harness)
    assert len(instants) == 10  # every 10 hours for four days, the last (6 h later) at the deadline
    assert seen == [State.REQUESTED, State.SEARCHING, State.FAILED]  # the same answer every time
    failed = harness.ledger.history(request.id)[-1].detail
    assert failed["error"] == "SearchDeadlinePassed"
    assert failed["reason"].startswith(
        "Looked 11 times from 2026-12-01T09:00:00Z until the deadline 2026-12-05T09:00:00Z (search_until)"
    )
    failures = [d for t, d in harness.events.puts if t == "ReservationFailed"]
    assert [(d["error"], d["request_id"]) for d in failures] == [("SearchDeadlinePassed", "demo-1")]
    assert [t for t in harness.slack.texts() if "Decision for demo-1: NO_OFFERING" in t]


def test_only_nothing_found_or_over_budget_looks_again_never_a_teams_refusal() -> None:
    plan = Plan(Decision.REJECTED, "above the budget", None)
    assert may_look_again(plan, None)
    assert not may_look_again(plan, "team ml-eval may not reserve in us-west-2")
    assert may_look_again(Plan(Decision.NO_OFFERING, "nothing", None), None)
    for decision in (Decision.PURCHASE, Decision.APPROVAL_REQUIRED, Decision.DRY_RUN):
        assert not may_look_again(Plan(decision, "fits", None), None)


def test_a_dry_run_never_waits_but_says_when_it_would_look_again(harness: Harness) -> None:
    request = record(harness, dry_run=True)
    out = look(harness, request, 0)
    assert out.decision == "NO_OFFERING"
    assert out.next_look_at == NOW + timedelta(minutes=15)
    assert "it would look again at 2026-12-01T09:15:00Z" in out.reason
    assert State.SEARCHING not in states(harness)


def test_plans_say_when_the_workflow_would_look_next(harness: Harness) -> None:
    body = request_body(search_until="2026-12-05T09:00:00Z", search_every_minutes=120)
    result = plan_reservation(body, harness.ports)
    assert result.decision == "NO_OFFERING"
    assert result.next_look_at == NOW + timedelta(hours=2)
    assert "keeps looking until 2026-12-05T09:00:00Z" in result.reason
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    found = plan_reservation(body, harness.ports)
    assert (found.decision, found.next_look_at) == ("DRY_RUN", None)


def test_a_cancel_during_the_wait_fails_the_waiting_token_and_looks_no_further(harness: Harness) -> None:
    request = record(harness)
    assert look(harness, request, 0).decision == "SEARCH_AGAIN"
    notify(NotifyInput(kind="search_wait", request_id=request.id, task_token="wait-1"), harness.ports)
    assert cancel_reservation(request.id, harness.ports, actor="alice")["status"] == "CANCELLED"
    assert ("failure", "wait-1", {"error": "ReservationCancelled", "cause": "cancelled by alice"}) in (
        harness.tasks.calls
    )
    # A wait task that starts after the cancel (its token unseen by the DELETE) stops at once.
    with pytest.raises(ReservationCancelled, match="looks no further"):
        notify(NotifyInput(kind="search_wait", request_id=request.id, task_token="wait-2"), harness.ports)
    with pytest.raises(ReservationCancelled):
        look(harness, request, 1)
    assert states(harness) == [State.REQUESTED, State.SEARCHING, State.CANCELLED]
