"""Door logic: the dry-run plan (``POST /plans``) and the reservations listing (``GET /reservations``)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from capacity.errors import InvalidRequest
from capacity.logic.doors.api import list_reservations, validation_problems
from capacity.logic.steps.plans import plan_reservation
from capacity.records import State
from capacity.request import parse_request

from tests.ledger_seed import seed
from tests.unit.conftest import Harness
from tests.unit.unit_fakes import NOW, raw_offering, request_body

# ------------------------------------------------------------------------------------------ plans


def test_plan_ranks_offerings_across_regions_and_buys_nothing(harness: Harness) -> None:
    harness.world.add_offerings("us-east-1", raw_offering("tpo-east", fee="2400"))
    harness.world.add_offerings("us-west-2", raw_offering("tpo-west", fee="2100", zone="us-west-2b"))

    result = plan_reservation(request_body(approval_above_usd="2000"), harness.ports)

    assert result.decision == "DRY_RUN"
    assert result.recommendation is not None
    assert result.recommendation.offering_id == "tpo-west"
    assert [o.offering_id for o in result.offerings] == ["tpo-west", "tpo-east"]
    best = result.offerings[0]
    # 2 x ml.p5.48xlarge x 72 h on demand at $55.04/h (seed 000's rate)
    assert best.on_demand_equivalent_usd == Decimal("7925.76")
    assert best.break_even_utilisation == Decimal("0.2650")  # 2100 / 7925.76
    assert result.needs_approval is True  # $2,100 is above the $2,000 approval threshold
    assert "would buy it" in result.reason
    assert "$2,100.00" in result.reason
    assert result.regions_searched == ["us-east-1", "us-west-2"]
    assert harness.world.names("CreateTrainingPlan") == []
    assert harness.ledger.items("demo-1") == []
    assert harness.events.types() == []


def test_plan_over_budget_is_rejected_with_the_fee_to_raise_it_to(harness: Harness) -> None:
    harness.world.add_offerings("us-east-1", raw_offering("tpo-dear", fee="45000"))

    result = plan_reservation(request_body(), harness.ports)

    assert result.decision == "REJECTED"
    assert "raise the budget to at least $45,000.00" in result.reason
    assert result.advice.option == "training-plan"
    assert result.advice.reason.endswith(
        "Its fee is above the budget max_upfront_fee_usd $30,000.00, so nothing would be bought: raise the "
        "budget or shorten the reservation."
    )


def test_plan_reports_quota_and_nothing_found(harness: Harness) -> None:
    harness.world.quota_regions.add("us-west-2")

    result = plan_reservation(request_body(), harness.ports)

    assert result.decision == "NO_OFFERING"
    assert result.recommendation is None
    assert set(result.quota_errors) == {"us-west-2"}
    assert "Quota exceeded in us-west-2" in result.reason


def test_plan_stops_searching_at_the_time_limit_and_names_the_regions_left(harness: Harness) -> None:
    harness.world.add_offerings("us-east-1", raw_offering("tpo-east", fee="2400"))
    ticks = iter([0.0, 0.0, 25.0])  # start, before us-east-1, before us-west-2

    result = plan_reservation(
        request_body(), harness.ports, time_limit_seconds=20, monotonic=lambda: next(ticks)
    )

    assert result.regions_searched == ["us-east-1"]
    assert list(result.regions_not_searched) == ["us-west-2"]
    assert "20 s time limit" in result.reason
    assert result.decision == "DRY_RUN"


def test_plan_validates_the_request_like_a_reservation(harness: Harness) -> None:
    with pytest.raises(InvalidRequest) as caught:
        plan_reservation(request_body(instance_count=3), harness.ports)
    assert [e.field for e in caught.value.errors] == ["instance_count"]


def test_plan_advice_for_a_later_window_is_the_training_plan_with_its_break_even(harness: Harness) -> None:
    harness.world.add_offerings("us-west-2", raw_offering("tpo-west", fee="2100", zone="us-west-2b"))

    advice = plan_reservation(request_body(), harness.ports).advice

    assert advice.option == "training-plan"
    assert advice.cost_usd == Decimal("2100")
    assert advice.on_demand_cost_usd == Decimal("7925.76")  # 2 x 72 h x $55.04
    assert advice.break_even_utilisation == Decimal("0.2650")
    assert advice.on_demand_available is None
    assert advice.on_demand_check == "not tried: strategy reserved always reserves"
    assert [(a.option, a.cost_usd) for a in advice.alternatives] == [("on-demand", Decimal("7925.76"))]
    assert advice.reason.startswith(
        "The window starts 2026-12-08 11:30 UTC, more than an hour from now: on-demand capacity cannot be "
        "promised that far ahead, so reserve it. The cheapest feasible of 1 offerings is chosen"
    )
    assert "pays off only if the capacity is used more than 26% of the reserved hours" in advice.text


def test_plan_advice_for_a_window_starting_now_is_on_demand_tried_first(harness: Harness) -> None:
    harness.world.add_offerings("us-east-1", raw_offering("tpo-east", fee="2100"))
    body = request_body(earliest_start=(NOW + timedelta(minutes=30)).isoformat(), max_upfront_fee_usd="40000")

    result = plan_reservation(body, harness.ports)

    assert result.decision == "DRY_RUN"  # the reservation the workflow falls back to
    assert result.recommendation is not None
    advice = result.advice
    assert advice.option == "on-demand"
    assert advice.cost_usd == Decimal("7925.76")
    assert [(a.option, a.cost_usd) for a in advice.alternatives] == [("training-plan", Decimal("2100"))]
    assert advice.on_demand_check == (
        "unknown: only launching (CreateEndpoint) tells whether on-demand capacity is free and a plan "
        "launches nothing; the workflow tries on demand first in us-east-1, us-west-2, in that order"
    )
    assert "If no region has capacity, it reserves the training-plan below instead." in advice.reason
    assert advice.text.startswith("Recommended: on-demand ($7,925.76).")
    assert harness.world.names("CreateEndpoint") == []


def test_plan_advice_skips_on_demand_above_the_budget_like_the_workflow(harness: Harness) -> None:
    harness.world.add_offerings("us-east-1", raw_offering("tpo-east", fee="2100"))
    body = request_body(earliest_start=(NOW + timedelta(minutes=30)).isoformat())  # budget $30,000

    advice = plan_reservation(body, harness.ports).advice

    assert advice.option == "training-plan"
    # 2 x $55.04 x 314.5 h (now to latest_end: on-demand instances run until then)
    assert advice.on_demand_check == (
        "not tried: on demand until 2026-12-14 11:30 UTC would cost about $34,620.16, above the budget "
        "$30,000.00"
    )


def test_plan_for_g6_searches_no_training_plan_and_explains_there_is_no_fallback(harness: Harness) -> None:
    body = request_body(
        instance_type="ml.g6.12xlarge",
        instance_count=1,
        duration_hours=24,
        earliest_start=(NOW + timedelta(minutes=30)).isoformat(),
    )
    body["models"] = [{**m, "accelerators": 1, "cpu_cores": 4, "memory_mb": 16384} for m in body["models"]]

    result = plan_reservation(body, harness.ports)

    assert harness.world.names("SearchTrainingPlanOfferings") == []  # AWS would answer ValidationException
    assert result.decision == "NO_OFFERING"
    assert result.regions_searched == []
    assert result.advice.option == "on-demand"
    assert result.advice.cost_usd == Decimal("110.44")  # 24 h x $4.6016
    assert result.advice.alternatives == []
    assert result.reason.startswith("Nothing to reserve: The window starts now")
    assert result.reason.endswith(
        "No training plan exists for ml.g6.12xlarge, so there is no reservation fallback: if no region has "
        "on-demand capacity, the request ends FAILED."
    )


def test_plan_rejects_g6_with_strategy_reserved(harness: Harness) -> None:
    body = request_body(instance_type="ml.g6.12xlarge", instance_count=1, duration_hours=24)
    body["models"] = [{**m, "accelerators": 1, "cpu_cores": 4, "memory_mb": 16384} for m in body["models"]]
    with pytest.raises(InvalidRequest) as caught:
        plan_reservation(body, harness.ports)
    assert [e.field for e in caught.value.errors] == ["instance_type"]
    assert "training plans reserve ml.p4d.24xlarge" in caught.value.errors[0].message


# ----------------------------------------------------------------------------------------- listing


def _record(harness: Harness, request_id: str, *states: State) -> None:
    request = parse_request(request_body(request_id=request_id), now=None)
    harness.ledger.record_request(request, actor="tests")
    for state in states:
        seed(harness.ledger, request_id, state, actor="tests")
    harness.clock.advance(minutes=1)


def test_listing_is_newest_first_and_filters_on_the_current_state(harness: Harness) -> None:
    _record(harness, "r-1", State.PLANNED, State.FAILED)
    _record(harness, "r-2", State.PLANNED)
    _record(harness, "r-3", State.PLANNED, State.AWAITING_APPROVAL)

    everything = list_reservations(harness.ports)
    planned = list_reservations(harness.ports, status=State.PLANNED)

    assert [r["request_id"] for r in everything["reservations"]] == ["r-3", "r-2", "r-1"]
    assert [r["state"] for r in everything["reservations"]] == ["AWAITING_APPROVAL", "PLANNED", "FAILED"]
    assert everything["next_token"] is None
    assert [r["request_id"] for r in planned["reservations"]] == ["r-2"]  # r-1 and r-3 moved on
    first = everything["reservations"][0]
    assert first["instance_type"] == "ml.p5.48xlarge"
    assert first["created_at"] == "2026-12-01T09:02:00Z"
    assert first["links"]["self"] == "/reservations/r-3"


def test_a_listing_page_is_one_query_and_one_batch_read_however_many_it_lists(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(12):
        _record(harness, f"r-{index}", State.PLANNED, State.READY if index % 3 else State.FAILED)
    calls: list[str] = []
    client = harness.ledger._client

    class Counting:
        def __getattr__(self, name: str) -> object:
            calls.append(name)
            return getattr(client, name)

    monkeypatch.setattr(harness.ledger, "_client", Counting())

    page = list_reservations(harness.ports, limit=10)

    assert [r["request_id"] for r in page["reservations"]] == [f"r-{i}" for i in range(11, 1, -1)]
    assert [r["state"] for r in page["reservations"]][:3] == ["READY", "READY", "FAILED"]  # r-11, r-10, r-9
    assert calls == ["query", "batch_get_item"]  # not a query per reservation


def test_listing_pages_with_an_opaque_token(harness: Harness) -> None:
    for index in range(5):
        _record(harness, f"r-{index}")

    seen: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        page = list_reservations(harness.ports, limit=2, next_token=token)
        seen += [r["request_id"] for r in page["reservations"]]
        pages += 1
        token = page["next_token"]
        if token is None:
            break

    assert seen == ["r-4", "r-3", "r-2", "r-1", "r-0"]
    assert pages == 3


def test_listing_filtered_pages_skip_what_does_not_match(harness: Harness) -> None:
    for index in range(6):
        _record(harness, f"r-{index}", State.FAILED if index % 2 else State.PLANNED)

    first = list_reservations(harness.ports, status=State.FAILED, limit=2)
    second = list_reservations(harness.ports, status=State.FAILED, limit=2, next_token=first["next_token"])

    assert [r["request_id"] for r in first["reservations"]] == ["r-5", "r-3"]
    assert [r["request_id"] for r in second["reservations"]] == ["r-1"]
    assert second["next_token"] is None


@pytest.mark.parametrize("token", ["not-base64!", "e30", "eyJsaXN0aW5nIjoib3RoZXIifQ"])
def test_listing_refuses_a_token_it_did_not_issue(harness: Harness, token: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        list_reservations(harness.ports, next_token=token)
    assert caught.value.errors[0].field == "next_token"


def test_validation_problems_name_the_field_without_the_location_prefix() -> None:
    problems = validation_problems(
        [
            {"loc": ("body", "instance_count"), "type": "int_type", "msg": "Input should be a valid integer"},
            {"loc": ("query", "limit"), "type": "less_than_equal", "msg": "...", "ctx": {"le": 100}},
            {"loc": ("body", "max_upfront_fee_usd"), "type": "missing", "msg": "Field required"},
            {"loc": ("body", 7), "type": "json_invalid", "msg": "JSON decode error", "ctx": {"error": "x"}},
            {"loc": ("body", "schedule_expression"), "type": "value_error", "msg": "Value error, use cron()"},
        ]
    )
    assert [(p.field, p.message) for p in problems] == [
        ("instance_count", "must be a whole number (a JSON integer, not a string, a boolean or a fraction)"),
        ("limit", "must be at most 100"),
        ("max_upfront_fee_usd", 'is required: set the budget, the most to pay upfront in USD (e.g. "30000")'),
        ("body", "is not valid JSON: x"),
        ("schedule_expression", "use cron()"),
    ]
