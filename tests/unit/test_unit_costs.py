"""Cost accounting from what ran (issue 16): instance counts over time, the cost summary's use, price per
used instance-hour and saving or loss against on-demand."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from capacity.logic.governance.costs import cost_summary, instance_hours, record_usage
from capacity.logic.steps.common import Purchase
from capacity.messages import released
from capacity.records import CostSummary, State

from tests.ledger_seed import seed
from tests.unit.conftest import Harness
from tests.unit.unit_fakes import NOW

START = NOW + timedelta(days=7)
BLOCK_ID = "cr-0123456789abcdef0"


def _purchase() -> Purchase:
    return Purchase(
        {
            "training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/co-r",
            "training_plan_name": "co-r",
            "region": "us-east-1",
            "start_time": START.isoformat(),
            "end_time": (START + timedelta(hours=72)).isoformat(),
            "upfront_fee_usd": "1990.60",
            "instance_type": "ml.p5.48xlarge",
            "instance_count": 2,
        }
    )


def test_the_integral_is_the_step_function_of_the_observations() -> None:
    points = [(START, 1), (START + timedelta(hours=10), 2), (START + timedelta(hours=12), 0)]
    assert instance_hours(points, START, START + timedelta(hours=20)) == Decimal(14)
    assert instance_hours(points, START + timedelta(hours=11), START + timedelta(hours=13)) == Decimal(2)
    assert instance_hours([], START, START + timedelta(hours=5)) == 0


def _served(harness: Harness, hours: float, instances: int) -> list:  # type: ignore[type-arg]
    harness.clock.now = START
    seed(harness.ledger, "r", State.READY, actor="t")
    record_usage(harness.ports, "r", instances, source="ready")
    harness.clock.now = START + timedelta(hours=hours)
    seed(harness.ledger, "r", State.RELEASING, actor="t")
    return harness.ledger.history("r")


def test_the_demo_used_one_of_two_instances_so_half_the_instance_hours(harness: Harness) -> None:
    history = _served(harness, 70 + 49 / 60, 1)  # the demo: READY 11:41, RELEASING 10:30 three days on
    summary = cost_summary("r", _purchase(), history, now=harness.clock.now, ports=harness.ports)
    assert (summary.instance_hours_used, summary.instance_hours_reserved) == (
        Decimal("70.82"),
        Decimal("144.00"),
    )
    assert summary.utilisation_percent == Decimal("49.2")  # not 98.4: one instance of two served
    assert summary.effective_usd_per_served_instance_hour == Decimal("28.11")
    assert (summary.saving_usd, summary.saving_percent) == (Decimal("1907.15"), Decimal("48.9"))
    assert summary.usage_observed is True


def test_the_plans_in_use_count_before_service_does_not_lower_the_hours_in_service(harness: Harness) -> None:
    harness.clock.now = START - timedelta(hours=3)  # the activation poll: the plan Active, nothing on it yet
    record_usage(harness.ports, "r", 0, source="training-plan")
    harness.clock.now = START
    seed(harness.ledger, "r", State.READY, actor="t")
    harness.clock.now = START + timedelta(minutes=1)  # DescribeEndpoint answered a minute after READY
    record_usage(harness.ports, "r", 1, source="ready")
    harness.clock.now = START + timedelta(hours=70, minutes=49)
    seed(harness.ledger, "r", State.RELEASING, actor="t")
    history = harness.ledger.history("r")
    summary = cost_summary("r", _purchase(), history, now=harness.clock.now, ports=harness.ports)
    # 70.82, not 70.80: the 0 seen before READY is the time before service, not its first minute
    assert (summary.instance_hours_used, summary.instance_hours_reserved) == (
        Decimal("70.82"),
        Decimal("144.00"),
    )
    assert summary.usage_observed is True


def test_only_an_observation_before_service_leaves_the_use_assumed(harness: Harness) -> None:
    harness.clock.now = START - timedelta(hours=3)
    record_usage(harness.ports, "r", 0, source="training-plan")
    harness.clock.now = START
    seed(harness.ledger, "r", State.READY, actor="t")
    harness.clock.now = START + timedelta(hours=10)
    seed(harness.ledger, "r", State.RELEASING, actor="t")
    history = harness.ledger.history("r")
    summary = cost_summary("r", _purchase(), history, now=harness.clock.now, ports=harness.ports)
    # not 0 used: nothing was observed in service, so the reservation's 2 instances are assumed, and said so
    assert (summary.instance_hours_used, summary.usage_observed) == (Decimal("20.00"), False)


def test_a_reservation_idle_80_percent_of_the_time_reports_its_loss(harness: Harness) -> None:
    history = _served(harness, 72 * 0.2, 2)  # both instances, 20% of the time
    summary = cost_summary("r", _purchase(), history, now=harness.clock.now, ports=harness.ports)
    assert summary.utilisation_percent == Decimal("20.0")
    assert summary.saving_usd is not None
    assert summary.saving_usd < 0  # 28.8 instance-hours on demand: $1,585.15 < the $1,990.60 fee
    assert summary.saving_usd == Decimal("-405.45")
    text = released(summary, request_id="r", reason="reservation-end").text
    assert "Loss vs on-demand" in text
    assert "28.80 of 144.00 (20.0%)" in text


def test_the_summary_names_a_block_by_its_id_and_a_plan_by_its_name(harness: Harness) -> None:
    # Given a training plan and a capacity block that served the same hours
    history = _served(harness, 10, 2)
    block = Purchase(
        {
            "kind": "capacity-block",
            "capacity_reservation_arn": f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{BLOCK_ID}",
            "capacity_reservation_id": BLOCK_ID,
            "availability_zone": "us-east-1a",
            "region": "us-east-1",
            "start_time": START.isoformat(),
            "end_time": (START + timedelta(hours=72)).isoformat(),
            "upfront_fee_usd": "1990.60",
            "instance_type": "p5.48xlarge",
            "instance_count": 2,
        }
    )

    # When each is summed up
    now = harness.clock.now
    plan_summary = cost_summary("r", _purchase(), history, now=now, ports=harness.ports)
    block_summary = cost_summary("r", block, history, now=now, ports=harness.ports)

    # Then each is named in its platform's words, and the message reads as it always did
    assert (plan_summary.training_plan_name, plan_summary.capacity_reservation_id) == ("co-r", None)
    assert (block_summary.training_plan_name, block_summary.capacity_reservation_id) == (
        None,
        "cr-0123456789abcdef0",
    )
    assert "cr-0123456789abcdef0 (us-east-1)" in released(block_summary, request_id="r", reason=None).text


def test_a_summary_recorded_before_issue_28_reads_as_what_it_named() -> None:
    # Given summaries that named everything training_plan_name (no market)
    base = {
        "request_id": "r",
        "region": "us-east-1",
        "instance_type": "p5.48xlarge",
        "instance_count": 2,
        "upfront_fee_usd": "0",
        "hours_reserved": "72",
        "hours_served": "10",
        "utilisation_percent": "13.9",
    }
    # When they are read / Then a block's id, on-demand capacity and a plan's name each read as what they are
    block = CostSummary.model_validate({**base, "training_plan_name": "cr-0123456789abcdef0"})
    spot = CostSummary.model_validate({**base, "training_plan_name": "spot instances"})
    plan = CostSummary.model_validate({**base, "training_plan_name": "co-r"})
    assert (block.market, block.training_plan_name, block.capacity_reservation_id) == (
        "reserved",
        None,
        "cr-0123456789abcdef0",
    )
    assert (spot.market, spot.training_plan_name) == ("spot", None)
    assert (plan.market, plan.training_plan_name, plan.capacity_reservation_id) == ("reserved", "co-r", None)
