"""Every dollar counts against the team (issue 28, point 6): on demand is held in the team's month, the
account cap and the quota before it is launched (the purchase's mechanism, moto DynamoDB with the template's
key schema), given back when nothing ran, settled from what ran; the pure figures it is judged by."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.adapters.policy_store import PolicyStore
from capacity.logic.governance import on_demand_spend
from capacity.logic.governance.costs import on_demand_summary, read_usage, record_usage
from capacity.logic.steps.common import Purchase
from capacity.logic.steps.plans import plan_reservation
from capacity.offerings import Offering
from capacity.planner import Decision, decide
from capacity.pricing import on_demand_usd_per_hour
from capacity.ranking import normalise_offering
from capacity.recommendation import (
    TeamLeft,
    on_demand_check,
    on_demand_hold_usd,
    on_demand_over_limit,
)
from capacity.record_kinds import ON_DEMAND_REFUSED
from capacity.records import State
from capacity.request import ReservationRequest, parse_request
from capacity.teams import AccountPolicy, TeamPolicy

from tests.ledger_seed import seed
from tests.unit.conftest import REGION, Harness
from tests.unit.handler_support import create_policy_table
from tests.unit.unit_fakes import NOW, raw_offering, request_body

DAY_ON_DEMAND = Decimal("1320.96")
"""1 x ml.p5.48xlarge on demand in us-east-1 for 24 h ($55.04 per instance-hour)."""


MEMBER = "arn:aws:sts::123456789012:assumed-role/MlSmall/sam"


def now_request(request_id: str = "od-1", **overrides: Any) -> ReservationRequest:
    """1 x ml.p5.48xlarge from now for 24 h in us-east-1, on demand first, team ml-small."""
    fields: dict[str, Any] = {
        "request_id": request_id,
        "requester": MEMBER,
        "team": "ml-small",
        "instance_count": 1,
        "earliest_start": NOW.isoformat(),
        "latest_end": (NOW + timedelta(hours=24)).isoformat(),
        "duration_hours": 24,
        "regions": ["us-east-1"],
        "max_upfront_fee_usd": "2000",
        "strategy": "on-demand-first",
    }
    body = request_body(**{**fields, **overrides})
    return parse_request(body, now=NOW)


def day_offering(request: ReservationRequest, fee: Decimal) -> Offering:
    """A training plan offering of the request's day, for ``fee`` USD."""
    raw = raw_offering("tpo-day", fee=f"{fee:f}", start=NOW, hours=24, count=1)
    found = normalise_offering(
        raw, region="us-east-1", request=request, searched_duration_hours=24, searched_count=1
    )
    assert found is not None
    return found


@pytest.fixture
def store(harness: Harness) -> PolicyStore:
    """The policy table with team ml-small: $2,000 a month, 2 ml.p5 instances at once."""
    result = create_policy_table(REGION)
    harness.ports._policy = result
    team = {
        "name": "ml-small",
        "members": {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/MlSmall/*"]},
        "approvers": {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/Approvers/*"]},
        "monthly_budget_usd": "2000",
        "approval_above_usd": "2000",
        "instance_types": ["ml.p5.48xlarge"],
        "regions": ["us-east-1", "us-west-1"],
        "instance_quota": {"ml.p5": 2},
    }
    result.put_team(TeamPolicy.model_validate(team), actor="t", now=NOW)
    harness.clock.now = NOW
    return result


# ----------------------------------------------------------------------------------------- pure figures


def test_the_hold_is_count_x_hours_to_the_end_x_the_dearest_rate_of_the_regions() -> None:
    assert on_demand_hold_usd(now_request(), NOW) == DAY_ON_DEMAND
    two = now_request(instance_count=2, regions=["us-east-1", "us-west-1"], max_upfront_fee_usd="5000")
    west = on_demand_usd_per_hour("us-west-1", "ml.p5.48xlarge")
    assert west == Decimal("61.6448")  # $55.04 x 1.12: the launch may land there
    assert on_demand_hold_usd(two, NOW) == Decimal("2958.95")  # 2 x 24 h x $61.6448
    assert on_demand_hold_usd(now_request(), NOW + timedelta(hours=6)) == Decimal("990.72")  # 18 h left


def test_one_approval_rule_judges_a_purchase_fee_and_an_on_demand_hold() -> None:
    """Above the threshold, not at it: the hold of a launch and a fee of the same amount ask alike."""
    at = now_request(approval_above_usd=str(DAY_ON_DEMAND))
    above = now_request(approval_above_usd=str(DAY_ON_DEMAND - Decimal("0.01")))
    assert on_demand_over_limit(at, NOW) is None
    over = on_demand_over_limit(above, NOW)
    assert over is not None
    assert (over.limit, over.cost_usd) == ("approval", DAY_ON_DEMAND)
    assert decide(at, [day_offering(at, DAY_ON_DEMAND)]).decision is Decision.PURCHASE
    assert decide(above, [day_offering(above, DAY_ON_DEMAND)]).decision is Decision.APPROVAL_REQUIRED


def test_the_dry_run_says_on_demand_is_not_tried_above_what_the_team_has_left() -> None:
    left = TeamLeft(Decimal("679.04"), "team ml-small has $679.04 left in December 2026")
    assert on_demand_check(now_request(), NOW, team_left=left) == (
        "not tried: team ml-small has $679.04 left in December 2026, less than on demand until "
        "2026-12-02 09:00 UTC would cost ($1,320.96)"
    )
    roomy = TeamLeft(Decimal(2000), "team ml-small has $2,000.00 left in December 2026")
    assert on_demand_check(now_request(), NOW, team_left=roomy).startswith("unknown: only launching")


def test_the_dry_run_weighs_on_demand_against_what_the_callers_team_has_left(
    harness: Harness, store: PolicyStore
) -> None:
    body = now_request("od-plan").model_dump(mode="json", exclude_none=True)
    fits = plan_reservation(body, harness.ports, requester=MEMBER)
    assert fits.advice.option == "on-demand"
    assert fits.advice.on_demand_check.startswith("unknown: only launching")
    assert on_demand_spend.hold_on_demand(now_request("od-1"), harness.ports, NOW) is None
    crowded = plan_reservation(body, harness.ports, requester=MEMBER)
    assert crowded.advice.on_demand_check == (
        "not tried: team ml-small has $679.04 left in December 2026, less than on demand until "
        "2026-12-02 09:00 UTC would cost ($1,320.96)"
    )
    assert crowded.advice.option != "on-demand"


# ------------------------------------------------------------------------------------------ the hold


def test_on_demand_is_held_on_the_month_and_quota_and_a_retry_holds_nothing_twice(
    harness: Harness, store: PolicyStore
) -> None:
    for _ in range(2):
        assert on_demand_spend.hold_on_demand(now_request(), harness.ports, NOW) is None
    assert store.spent("2026-12", "ml-small") == DAY_ON_DEMAND
    assert store.spent("2026-12", None) == DAY_ON_DEMAND
    assert store.reserved_instances("ml-small", "ml.p5") == 1
    hold = store.hold("od-1#ON_DEMAND")
    assert hold is not None
    assert (hold.amount_usd, hold.instances, hold.month) == (DAY_ON_DEMAND, 1, "2026-12")


def test_on_demand_above_what_the_month_has_left_is_refused_recorded_and_holds_nothing(
    harness: Harness, store: PolicyStore
) -> None:
    assert on_demand_spend.hold_on_demand(now_request("od-1"), harness.ports, NOW) is None
    refusal = on_demand_spend.hold_on_demand(now_request("od-2"), harness.ports, NOW)
    assert refusal == (
        "team ml-small has $679.04 left in December 2026 of its monthly budget $2,000.00; on demand for "
        "1 x ml.p5.48xlarge until 2026-12-02 09:00 UTC costs $1,320.96: nothing was launched on demand"
    )
    assert on_demand_spend.refused_on_demand(harness.ports, "od-2") == refusal
    recorded = harness.ledger.get("od-2", ON_DEMAND_REFUSED)
    assert recorded is not None
    assert recorded["amount_usd"] == "1320.96"
    assert store.spent("2026-12", "ml-small") == DAY_ON_DEMAND
    assert store.reserved_instances("ml-small", "ml.p5") == 1
    assert store.hold("od-2#ON_DEMAND") is None


def test_on_demand_above_what_the_account_cap_has_left_is_refused(
    harness: Harness, store: PolicyStore
) -> None:
    store.put_account(AccountPolicy.model_validate({"monthly_cap_usd": "1000"}), actor="t", now=NOW)
    refusal = on_demand_spend.hold_on_demand(now_request(), harness.ports, NOW)
    assert refusal == (
        "the account has $1,000.00 left in December 2026 of its $1,000.00 cap; on demand for 1 x "
        "ml.p5.48xlarge until 2026-12-02 09:00 UTC costs $1,320.96: nothing was launched on demand"
    )
    assert (store.spent("2026-12", None), store.reserved_instances("ml-small", "ml.p5")) == (Decimal(0), 0)


def test_the_quota_counts_instances_held_on_demand(harness: Harness, store: PolicyStore) -> None:
    cheap = {"latest_end": (NOW + timedelta(hours=25)).isoformat(), "duration_hours": 24}
    assert (
        on_demand_spend.hold_on_demand(now_request("od-1", **cheap), harness.ports, NOW + timedelta(hours=24))
        is None
    )
    two = now_request("od-2", instance_count=2, max_upfront_fee_usd="2000", **cheap)
    refusal = on_demand_spend.hold_on_demand(two, harness.ports, NOW + timedelta(hours=24))
    assert refusal is not None
    assert refusal.startswith(
        "team ml-small holds 1 of its 2 ml.p5 instances; on demand for 2 x ml.p5.48xlarge"
    )
    assert refusal.endswith("needs more than the 1 left: nothing was launched on demand")


def test_two_on_demand_launches_racing_for_the_month_cannot_both_pass(
    harness: Harness, store: PolicyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each alone fits the $2,000 month, both do not: both read the month and decide before either writes
    (moto's transactions are not thread-safe: the lock stands for DynamoDB's serializable isolation)."""
    client: Any = store._client
    original = client.transact_write_items
    both_decided = threading.Barrier(2)
    serial = threading.Lock()

    def transact(**kwargs: Any) -> Any:
        both_decided.wait(timeout=30)
        with serial:
            return original(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", transact)
    start = threading.Barrier(2)
    results: dict[str, str | None] = {}

    def launch(request_id: str) -> None:
        start.wait()
        results[request_id] = on_demand_spend.hold_on_demand(now_request(request_id), harness.ports, NOW)

    threads = [threading.Thread(target=launch, args=(rid,)) for rid in ("od-a", "od-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    monkeypatch.setattr(client, "transact_write_items", original)
    assert sorted(results.values(), key=str).count(None) == 1, results
    (refusal,) = [text for text in results.values() if text is not None]
    assert refusal.startswith("team ml-small has $679.04 left in December 2026")
    assert store.spent("2026-12", "ml-small") == DAY_ON_DEMAND


# ----------------------------------------------------------------------------- given back and settled


def test_a_launch_that_never_happened_gives_the_hold_back_once_and_is_not_held_again(
    harness: Harness, store: PolicyStore
) -> None:
    assert on_demand_spend.hold_on_demand(now_request(), harness.ports, NOW) is None
    assert on_demand_spend.give_back_on_demand(harness.ports, "od-1")
    assert not on_demand_spend.give_back_on_demand(harness.ports, "od-1")
    assert store.spent("2026-12", "ml-small") == 0
    assert store.reserved_instances("ml-small", "ml.p5") == 0
    again = on_demand_spend.hold_on_demand(now_request(), harness.ports, NOW)
    assert again is not None
    assert again.startswith("its on-demand tries ended and their hold of $1,320.96 was given back")


def test_a_launch_recorded_is_not_given_back_but_settled_to_what_ran(
    harness: Harness, store: PolicyStore
) -> None:
    assert on_demand_spend.hold_on_demand(now_request(), harness.ports, NOW) is None
    harness.ledger.put_once("od-1", "PURCHASE", {"market": "on-demand"})
    assert not on_demand_spend.give_back_on_demand(harness.ports, "od-1")  # the release settles it
    for _ in range(2):  # a retried release settles the same figure
        on_demand_spend.settle_on_demand(harness.ports, "od-1", Decimal("275.20"))
    assert store.spent("2026-12", "ml-small") == Decimal("275.20")
    assert store.spent("2026-12", None) == Decimal("275.20")
    assert store.reserved_instances("ml-small", "ml.p5") == 0
    hold = store.hold("od-1#ON_DEMAND")
    assert hold is not None
    assert (hold.amount_usd, hold.quota_returned, hold.money_returned) == (Decimal("275.20"), True, False)


def test_what_ran_on_demand_is_the_instance_hours_observed_at_the_on_demand_rate(harness: Harness) -> None:
    """An on-demand endpoint of 2 instances that scaled to 1 after 2 hours, released after 5: 7
    instance-hours, not 10."""
    start = NOW
    purchase = Purchase(
        {
            "market": "on-demand",
            "training_plan_arn": "",
            "training_plan_name": "",
            "region": "us-east-1",
            "start_time": start.isoformat(),
            "end_time": (start + timedelta(hours=24)).isoformat(),
            "upfront_fee_usd": "0",
            "instance_type": "ml.p5.48xlarge",
            "instance_count": 2,
        }
    )
    harness.clock.now = start
    seed(harness.ledger, "r", State.READY, actor="t")
    record_usage(harness.ports, "r", 2, source="ready")
    harness.clock.now = start + timedelta(hours=2)
    record_usage(harness.ports, "r", 1, source="scale")
    harness.clock.now = start + timedelta(hours=5)
    seed(harness.ledger, "r", State.RELEASING, actor="t")
    usage = read_usage(harness.ports, "r")
    summary = on_demand_summary(
        "r", purchase, harness.ledger.history("r"), now=harness.clock.now, usage=usage
    )
    assert (summary.hours_served, summary.instance_hours_used) == (Decimal("5.00"), Decimal("7.00"))
    assert summary.on_demand_equivalent_served_usd == Decimal("385.28")  # 7 x $55.04
    assert summary.usage_observed is True
