"""Slack messages people read (and the demo prints) and deterministic resource names."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from capacity import messages, naming
from capacity.planner import decide
from capacity.ranking import normalise_offering, rank
from capacity.records import CostSummary
from capacity.request import parse_request

from tests.unit.unit_fakes import NOW, WINDOW_START, raw_offering, request_body


def test_offerings_table_is_fixed_width_with_every_column() -> None:
    request = parse_request(request_body(), now=NOW)
    raws = [
        raw_offering("a", fee="2377.73"),
        raw_offering("b", fee="3100", start=WINDOW_START + timedelta(days=2), zone="us-east-1c"),
        raw_offering("c", fee="1500", hours=48),
    ]
    offerings = [
        o
        for o in (
            normalise_offering(
                r,
                region="us-east-1",
                request=request,
                searched_duration_hours=r["DurationHours"],
                searched_count=2,
            )
            for r in raws
        )
        if o is not None
    ]
    plan = decide(request, offerings)
    text = messages.offerings_table(request, plan, rank(offerings, request.regions)).text
    header = next(line for line in text.splitlines() if "Region" in line)
    for column in (
        "Region",
        "Zone",
        "Start (UTC)",
        "End (UTC)",
        "Upfront fee",
        "$/inst-h",
        "On-demand eq.",
        "Saving",
        "Break-even",
    ):
        assert column in header
    rows = [line for line in text.splitlines() if line.startswith((" 1 ", " 2 ")) and "us-east-1a" in line]
    assert len({len(row) for row in rows}) == 1  # fixed width
    first = " 1  us-east-1      us-east-1a       2026-12-09 11:30  2026-12-12 11:30     72     $2,377.73"
    assert first + "     16.51      $7,925.76   70.0%        30%" in text
    assert "48 h (requested 72 h)" in text  # the alternative and why it does not match
    assert "3 offerings found, 2 feasible." in text


def test_release_message_shows_the_cost_summary() -> None:
    summary = CostSummary(
        request_id="demo-1",
        training_plan_name="co-demo-1",
        region="us-east-1",
        instance_type="ml.p5.48xlarge",
        instance_count=2,
        upfront_fee_usd=Decimal("2377.73"),
        hours_reserved=Decimal("72.00"),
        hours_served=Decimal("70.67"),
        on_demand_usd_per_instance_hour=Decimal("55.04"),
        on_demand_equivalent_reserved_usd=Decimal("7925.76"),
        on_demand_equivalent_served_usd=Decimal("7779.45"),
        saving_usd=Decimal("5548.03"),
        saving_percent=Decimal("70.0"),
        utilisation_percent=Decimal("98.2"),
        break_even_utilisation_percent=Decimal("30.0"),
        effective_usd_per_served_instance_hour=Decimal("16.82"),
    )
    text = messages.released(summary, request_id="demo-1", reason="reservation-end").text
    assert "*demo-1 RELEASED* (reservation-end)" in text
    assert "Upfront fee                $2,377.73" in text
    assert "Hours served               70.67" in text
    assert "Instance-hours used        70.67 h (98.2% of reserved)" in text  # a summary of before issue 16
    assert "Saving vs on-demand        $5,548.03 (70.0%)" in text
    never = summary.model_copy(update={"saving_usd": Decimal("-2377.73"), "saving_percent": None})
    cancelled = messages.released(never, request_id="demo-1", reason="cancelled").text
    assert "-$2,377.73 (never served" in cancelled
    assert "Loss vs on-demand" in cancelled
    assert "nothing had been bought" in messages.released(None, request_id="r", reason=None).text


def test_names_are_deterministic_and_within_sagemaker_limits() -> None:
    assert naming.training_plan_name("demo-1") == "co-demo-1"
    assert naming.endpoint_config_name("demo-1") == "co-demo-1-config"
    assert naming.endpoint_config_name("Demo_1") == "co-demo-1-de559182-config"
    assert naming.inference_component_name("demo-1", "llama-eu") == "co-demo-1-llama-eu"
    long_id = "A" * 64
    other = "A" * 63 + "B"
    names = [naming.training_plan_name(long_id), naming.endpoint_config_name(long_id)]
    names.append(naming.inference_component_name(long_id, "m" * 63))
    assert all(len(name) <= 63 for name in names)
    assert naming.training_plan_name(long_id) != naming.training_plan_name(other)
    assert naming.training_plan_name(long_id) == naming.training_plan_name(long_id)
    assert naming.release_schedule_name("demo-1") == "co-demo-1-release"
