"""Pricing arithmetic, offering normalisation, ranking and the planner's decisions."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from capacity import pricing
from capacity.offerings import Offering
from capacity.planner import Decision, decide
from capacity.ranking import alternatives, normalise_offering, rank
from capacity.request import ReservationRequest, parse_request

from tests.unit.unit_fakes import NOW, WINDOW_START, raw_offering, request_body


def make_request(**overrides: object) -> ReservationRequest:
    return parse_request(request_body(**overrides), now=NOW)


def offering(
    request: ReservationRequest,
    offering_id: str,
    fee: str,
    *,
    region: str = "us-east-1",
    days_after: int = 1,
    hours: int = 72,
    count: int = 2,
) -> Offering:
    raw = raw_offering(
        offering_id,
        fee=fee,
        start=WINDOW_START + timedelta(days=days_after),
        hours=hours,
        count=count,
        zone=f"{region}a",
    )
    result = normalise_offering(
        raw, region=region, request=request, searched_duration_hours=hours, searched_count=count
    )
    assert result is not None
    return result


# ----------------------------------------------------------------------------------------- pricing


def test_seed_anchor_price_for_p5_in_us_east_1() -> None:
    assert pricing.on_demand_usd_per_hour("us-east-1", "ml.p5.48xlarge") == Decimal("55.04")
    assert pricing.on_demand_usd_per_hour("eu-west-1", "ml.p5.48xlarge") == Decimal("59.4432")
    assert pricing.on_demand_usd_per_hour("us-east-1", "ml.unknown") is None


def test_saving_and_break_even_for_a_two_instance_three_day_plan() -> None:
    # Given 2 instances for 72 h at $55.04/h on demand and a $2,377.73 upfront fee
    equivalent = pricing.on_demand_equivalent(Decimal("55.04"), instance_count=2, hours=Decimal(72))
    fee = Decimal("2377.73")
    # Then on-demand costs 55.04 * 2 * 72, the saving is 70%, and it pays off above 30% utilisation
    assert equivalent == Decimal("7925.76")
    assert pricing.saving_percent(fee, equivalent) == Decimal("70.0")
    assert pricing.break_even_utilisation(fee, equivalent) == Decimal("0.3000")
    assert pricing.usd_per_instance_hour(fee, instance_count=2, hours=Decimal(72)) == Decimal("16.5120")


def test_break_even_above_one_means_never_cheaper_than_on_demand() -> None:
    assert pricing.break_even_utilisation(Decimal(200), Decimal(100)) == Decimal("2.0000")
    assert pricing.saving_percent(Decimal(200), Decimal(100)) == Decimal("-100.0")


def test_pricing_rejects_zero_denominators() -> None:
    with pytest.raises(ValueError, match="positive"):
        pricing.saving_percent(Decimal(1), Decimal(0))
    with pytest.raises(ValueError, match="instance-hour"):
        pricing.usd_per_instance_hour(Decimal(1), instance_count=0, hours=Decimal(1))


def test_money_formats() -> None:
    assert pricing.format_usd(Decimal("12345.678")) == "$12,345.68"
    assert pricing.format_usd(Decimal("-5")) == "-$5.00"
    assert pricing.money_str(Decimal("3E+4")) == "30000.00"


# ------------------------------------------------------------------------------------ normalising


def test_normalised_offering_has_usd_figures_and_is_feasible() -> None:
    request = make_request()
    result = offering(request, "tpo-1", "2377.73")
    assert result.upfront_fee_usd == Decimal("2377.73")
    assert result.on_demand_equivalent_usd == Decimal("7925.76")
    assert result.saving_percent == Decimal("70.0")
    assert result.break_even_utilisation == Decimal("0.3000")
    assert result.feasible
    assert result.infeasible_reason is None


def test_offering_of_another_duration_is_an_alternative_with_the_reason() -> None:
    request = make_request()
    result = offering(request, "tpo-2", "1500", hours=48)
    assert not result.feasible
    assert result.infeasible_reason == "48 h (requested 72 h)"


def test_offering_ending_after_the_window_is_infeasible() -> None:
    request = make_request()
    result = offering(request, "tpo-3", "1500", days_after=5)
    assert not result.feasible
    assert "after the window closes" in (result.infeasible_reason or "")


def test_non_usd_and_segmentless_offerings_are_skipped() -> None:
    request = make_request()
    raw = raw_offering("tpo-eur", fee="10", currency="EUR")
    assert (
        normalise_offering(
            raw, region="us-east-1", request=request, searched_duration_hours=72, searched_count=2
        )
        is None
    )
    raw = raw_offering("tpo-empty", fee="10")
    raw["ReservedCapacityOfferings"] = []
    assert (
        normalise_offering(
            raw, region="us-east-1", request=request, searched_duration_hours=72, searched_count=2
        )
        is None
    )


def test_segments_split_across_zones_add_their_instances() -> None:
    request = make_request()
    raw = raw_offering("tpo-split", fee="2400", count=1, zone="us-east-1a")
    second = dict(raw["ReservedCapacityOfferings"][0], AvailabilityZone="us-east-1b")
    raw["ReservedCapacityOfferings"].append(second)
    result = normalise_offering(
        raw, region="us-east-1", request=request, searched_duration_hours=72, searched_count=2
    )
    assert result is not None
    assert result.instance_count == 2
    assert result.availability_zone == "us-east-1a,us-east-1b"


# --------------------------------------------------------------------------------------- ranking


def test_rank_orders_by_fee_then_start_then_region_preference() -> None:
    request = make_request(regions=["us-west-2", "us-east-1"])
    cheap_late = offering(request, "a", "2000", days_after=2)
    cheap_early_east = offering(request, "b", "2000", days_after=1, region="us-east-1")
    cheap_early_west = offering(request, "c", "2000", days_after=1, region="us-west-2")
    pricey = offering(request, "d", "1999.99", hours=48)  # cheaper but infeasible
    expensive = offering(request, "e", "2500")
    ranked = rank([expensive, cheap_late, cheap_early_east, pricey, cheap_early_west], request.regions)
    assert [o.offering_id for o in ranked] == ["c", "b", "a", "e"]


def test_alternatives_are_nearest_first_and_varied() -> None:
    request = make_request()
    near = offering(request, "48h", "1500", hours=48)
    near_dup = offering(request, "48h-b", "1600", hours=48)
    half = offering(request, "half", "1200", count=1)
    far = offering(request, "24h", "500", hours=24)
    result = alternatives([far, half, near_dup, near], request)
    assert [o.offering_id for o in result] == ["half", "48h", "24h"]


# --------------------------------------------------------------------------------------- planner


def test_purchase_when_within_budget_and_below_threshold() -> None:
    request = make_request(approval_above_usd="25000")
    plan = decide(request, [offering(request, "tpo-1", "2377.73"), offering(request, "tpo-2", "3000")])
    assert plan.decision is Decision.PURCHASE
    assert plan.offering is not None
    assert plan.offering.offering_id == "tpo-1"
    assert "$2,377.73" in plan.reason
    assert "below the approval threshold $25,000.00" in plan.reason
    assert "saving 70.0%" in plan.reason


def test_over_budget_is_rejected_and_says_how_much_is_needed() -> None:
    request = make_request(max_upfront_fee_usd="2000")
    plan = decide(request, [offering(request, "tpo-1", "2377.73")])
    assert plan.decision is Decision.REJECTED
    assert "raise the budget to at least $2,377.73" in plan.reason


def test_above_approval_threshold_requires_approval() -> None:
    request = make_request(approval_above_usd="2000", approval_timeout_hours=12)
    plan = decide(request, [offering(request, "tpo-1", "2377.73")])
    assert plan.decision is Decision.APPROVAL_REQUIRED
    assert "approve within 12 h" in plan.reason


def test_dry_run_reports_the_pick_and_buys_nothing() -> None:
    request = make_request(dry_run=True, approval_above_usd="2000")
    plan = decide(request, [offering(request, "tpo-1", "2377.73")])
    assert plan.decision is Decision.DRY_RUN
    assert "Nothing was bought" in plan.reason
    assert "would need approval" in plan.reason


def test_no_offering_names_nearest_alternatives() -> None:
    request = make_request()
    found = [
        offering(request, "48h", "1500", hours=48),
        offering(request, "1x", "1200", count=1, region="us-west-2"),
    ]
    plan = decide(request, found)
    assert plan.decision is Decision.NO_OFFERING
    assert plan.offering is None
    assert "No offering of 2 x ml.p5.48xlarge for 72 h" in plan.reason
    assert "Nearest alternatives" in plan.reason
    assert "[48 h (requested 72 h)]" in plan.reason
    assert "[1 instances (requested 2)]" in plan.reason


def test_quota_error_is_reported_as_quota_not_as_no_capacity() -> None:
    request = make_request()
    plan = decide(request, [], quota_errors={"us-west-2": "ResourceLimitExceeded: limit 1"})
    assert plan.decision is Decision.NO_OFFERING
    assert "Quota exceeded in us-west-2" in plan.reason
    assert "not a lack of capacity" in plan.reason


def test_tie_on_fee_is_explained() -> None:
    request = make_request()
    plan = decide(request, [offering(request, "b", "2000", days_after=2), offering(request, "a", "2000")])
    assert plan.offering is not None
    assert plan.offering.offering_id == "a"
    assert "broken by the earlier start" in plan.reason


def test_planner_keeps_only_the_top_five() -> None:
    request = make_request()
    many = [offering(request, f"o{i}", str(2000 + i)) for i in range(12)]
    plan = decide(request, many)
    assert [o.offering_id for o in plan.top] == ["o0", "o1", "o2", "o3", "o4"]
    assert plan.considered == 12
