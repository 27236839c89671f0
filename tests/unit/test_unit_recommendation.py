"""The plan's recommendation (issue 6): which option, why, cost against the alternatives, break-even."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity import pricing
from capacity.instances import CAPACITY_BLOCK_INSTANCE_TYPES, INSTANCE_TYPES
from capacity.offerings import Offering
from capacity.ranking import normalise_block_offering
from capacity.recommendation import on_demand_over_limit, recommend
from capacity.request import parse_request

from tests.unit.test_unit_ec2_requests import ec2_body
from tests.unit.unit_fakes import NOW, request_body

SOON = NOW + timedelta(minutes=30)


def block(request: Any, *, fee: str = "4983.55", hours: int = 72, offering_id: str = "cb-1") -> Offering:
    start = datetime(2026, 12, 8, 11, 30, tzinfo=UTC)
    offering = normalise_block_offering(
        {
            "CapacityBlockOfferingId": offering_id,
            "InstanceType": request.instance_type,
            "AvailabilityZone": "us-east-1a",
            "InstanceCount": request.instance_count,
            "StartDate": start,
            "EndDate": start + timedelta(hours=hours),
            "CapacityBlockDurationHours": hours,
            "UpfrontFee": fee,
            "CurrencyCode": "USD",
        },
        region="us-east-1",
        request=request,
        searched_duration_hours=hours,
        searched_count=request.instance_count,
    )
    assert offering is not None
    return offering


def test_a_window_that_starts_now_recommends_on_demand_with_the_reservation_as_alternative() -> None:
    # budget above on demand until latest_end (314.5 h x 2 x $55.04 = $34,620.16): on demand is tried
    request = parse_request(
        ec2_body(
            earliest_start=SOON.isoformat(), latest_end="2026-12-14T11:30:00Z", max_upfront_fee_usd="40000"
        ),
        now=NOW,
    )
    assert request.strategy == "on-demand-first"
    plan = recommend(request, [block(request)], now=NOW)
    assert plan.option == "on-demand"
    # 2 x p5.48xlarge x 72 h x $55.04 (seed 000's us-east-1 price)
    assert plan.cost_usd == Decimal("7925.76")
    assert plan.break_even_utilisation == Decimal("0.6288")  # 4983.55 / 7925.76
    assert [a.option for a in plan.alternatives] == ["capacity-block"]
    assert plan.alternatives[0].cost_usd == Decimal("4983.55")
    assert "used more than 63% of the reserved hours" in plan.text
    assert "Recommended: on-demand ($7,925.76)" in plan.text
    # a plan launches nothing, so availability is unknown: the text says on demand is tried first
    assert "the workflow tries it first in us-east-1, us-west-2, in that order" in plan.reason
    assert "If no region has capacity, it reserves the capacity-block below instead." in plan.reason


def test_on_demand_above_the_budget_is_not_tried_so_the_plan_reserves() -> None:
    # on demand runs from now (09:00) to latest_end (14 Dec 11:30): 314.5 h x 2 x $55.04 > $30,000
    request = parse_request(
        ec2_body(earliest_start=SOON.isoformat(), latest_end="2026-12-14T11:30:00Z"), now=NOW
    )
    assert request.strategy == "on-demand-first"
    plan = recommend(request, [block(request)], now=NOW)
    assert plan.option == "capacity-block"
    assert plan.reason.startswith(
        "On demand is not tried: on demand until 2026-12-14 11:30 UTC would cost about $34,620.16, above "
        "the budget $30,000.00; the workflow reserves instead."
    )


def test_the_on_demand_budget_check_uses_the_dearest_region_the_launch_may_land_in() -> None:
    # 314.5 h x 2 x $55.04 = $34,620.16 in us-east-1, x 1.08 = $37,389.77 in eu-west-1: a budget between
    # the two would be exceeded if us-east-1 is full and eu-west-1 launches, so on demand is not tried.
    request = parse_request(
        ec2_body(
            earliest_start=SOON.isoformat(),
            latest_end="2026-12-14T11:30:00Z",
            max_upfront_fee_usd="36000",
            regions=["us-east-1", "eu-west-1"],
        ),
        now=NOW,
    )
    over = on_demand_over_limit(request, NOW)
    assert over is not None
    assert (over.cost_usd, over.limit) == (Decimal("37389.77"), "budget")
    assert recommend(request, [block(request)], now=NOW).option == "capacity-block"
    cheaper = request.model_copy(update={"regions": ["us-east-1", "us-west-2"]})
    assert on_demand_over_limit(cheaper, NOW) is None


def test_on_demand_with_no_known_price_is_never_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    # A spend that cannot be priced cannot be checked against the budget: the plan reserves instead.
    request = parse_request(
        ec2_body(
            earliest_start=SOON.isoformat(), latest_end="2026-12-14T11:30:00Z", max_upfront_fee_usd="40000"
        ),
        now=NOW,
    )
    assert on_demand_over_limit(request, NOW) is None  # priced: within the $40,000 budget
    monkeypatch.delitem(pricing.ON_DEMAND_USD_PER_HOUR_US_EAST_1, "ml.p5.48xlarge")
    over = on_demand_over_limit(request, NOW)
    assert over is not None
    assert (over.cost_usd, over.limit, over.limit_usd) == (None, "unpriced", Decimal("40000"))
    plan = recommend(request, [block(request)], now=NOW)
    assert plan.option == "capacity-block"
    assert "has no known price in every region of the request" in plan.reason


def test_every_instance_type_a_request_may_name_has_an_on_demand_price_in_every_known_region() -> None:
    # Else on demand of that type is never tried (above): the price table must keep up with the types.
    unpriced = [
        (region, instance_type)
        for instance_type in sorted(set(INSTANCE_TYPES) | CAPACITY_BLOCK_INSTANCE_TYPES)
        for region in sorted(pricing.KNOWN_REGIONS)
        if pricing.on_demand_usd_per_hour(region, instance_type) is None
    ]
    assert unpriced == []


def test_g6_on_demand_first_has_no_reservation_fallback() -> None:
    body = request_body(
        instance_type="ml.g6.12xlarge",
        instance_count=1,
        earliest_start=SOON.isoformat(),
        latest_end=(SOON + timedelta(hours=48)).isoformat(),
        duration_hours=24,
    )
    body["models"] = [{**m, "accelerators": 1, "cpu_cores": 4, "memory_mb": 16384} for m in body["models"]]
    request = parse_request(body, now=NOW)
    assert request.strategy == "on-demand-first"
    plan = recommend(request, [], now=NOW)
    assert plan.option == "on-demand"
    assert plan.cost_usd == Decimal("110.44")  # 1 x 24 h x $4.6016
    assert plan.alternatives == ()
    assert (
        "no reservation fallback: if no region has on-demand capacity, the request ends FAILED" in plan.reason
    )
    failed = recommend(request, [], now=NOW, on_demand_available=False)
    assert failed.option == "none"
    assert failed.reason == (
        "No training plan exists for ml.g6.12xlarge, so it runs on demand only, and no on-demand capacity "
        "was found: the request would end FAILED."
    )


def test_no_on_demand_capacity_and_spot_ok_recommends_spot() -> None:
    request = parse_request(
        ec2_body(earliest_start=SOON.isoformat(), strategy="spot-ok", max_upfront_fee_usd="40000"), now=NOW
    )
    plan = recommend(request, [block(request)], now=NOW, on_demand_available=False)
    assert plan.option == "spot"
    assert "interruptions" in plan.reason


def test_reserved_strategy_recommends_the_cheapest_feasible_offering_and_states_the_saving() -> None:
    request = parse_request(ec2_body(strategy="reserved", earliest_start=SOON.isoformat()), now=NOW)
    cheap, dear = block(request, fee="4983.55"), block(request, fee="5200", offering_id="cb-2")
    plan = recommend(request, [dear, cheap], now=NOW)
    assert plan.option == "capacity-block"
    assert plan.offering == cheap
    assert plan.cost_usd == Decimal("4983.55")
    assert plan.on_demand_cost_usd == Decimal("7925.76")
    assert "certainty" in plan.reason
    assert "used more than 63% of the reserved hours" in plan.text
    assert [a.option for a in plan.alternatives] == ["on-demand"]


def test_a_later_window_reserves_a_training_plan_for_sagemaker() -> None:
    request = parse_request(request_body(), now=NOW)  # starts a week later
    assert request.strategy == "reserved"
    plan = recommend(request, [], now=NOW)
    assert plan.option == "none"
    assert "widen the window" in plan.reason


def test_no_on_demand_capacity_for_a_window_starting_now_falls_back_to_reserving() -> None:
    request = parse_request(ec2_body(earliest_start=SOON.isoformat(), max_upfront_fee_usd="40000"), now=NOW)
    plan = recommend(request, [block(request)], now=NOW, on_demand_available=False)
    assert plan.option == "capacity-block"
    assert "No on-demand capacity" in plan.reason
