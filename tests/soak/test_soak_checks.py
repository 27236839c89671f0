"""The fault soak's invariant checks, on hand-made lifecycle facts: each fires on the state it guards against
and stays quiet on a lifecycle that kept the rules."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from localcloud.faults import FaultKind
from localcloud_soak.checks import (
    check,
    check_approval,
    check_approval_decision,
    check_billable,
    check_brought,
    check_budget,
    check_cancel_honoured,
    check_causers_do_not_approve,
    check_copies_recorded,
    check_double_purchase,
    check_extensions,
    check_failures_notified,
    check_final_state,
    check_invalid_deliveries,
    check_keep_looking,
    check_money_recorded,
    check_no_idle_money,
    check_paid_kept,
    check_rollovers,
    check_total_spend,
    check_window,
    keep_serving,
    looking,
    on_demand_spend,
    outcome,
    route,
)
from localcloud_soak.facts import ExtensionFact, Facts, PlanFact
from localcloud_soak.scenario import make_scenario

END = datetime(2026, 12, 20, 11, 30, tzinfo=UTC)
CAPACITY_BLOCK_TYPES = {"p4d.24xlarge", "p5.4xlarge", "p5.48xlarge", "p5e.48xlarge", "trn1.32xlarge"}
SERVED = [
    "REQUESTED",
    "PLANNED",
    "AWAITING_APPROVAL",
    "PURCHASED",
    "SCHEDULED",
    "ACTIVE",
    "DEPLOYING",
    "READY",
    "RELEASING",
    "RELEASED",
]


def _state(n: int, state: str, **extra: Any) -> dict[str, Any]:
    at = f"2026-11-30T09:{n:02d}:00.000Z"
    return {"sk": f"STATE#{at}#0000", "state": state, "at": at, "actor": "test", "detail": {}, **extra}


def _history(states: list[str]) -> list[dict[str, Any]]:
    return [
        _state(n, s, money_usd="1000.00") if s == "PURCHASED" else _state(n, s) for n, s in enumerate(states)
    ]


def _facts(**changes: Any) -> Facts:
    """A served lifecycle that kept every rule: approved at 09:02:30, bought at 09:03 for $1,000."""
    facts = Facts(
        request_id="soak",
        max_upfront_fee_usd=Decimal("1500.00"),
        approval_above_usd=Decimal("500.00"),
        dry_run=False,
        items=[
            {"sk": "REQUEST", "written_at": "2026-11-30T09:00:00.000Z"},
            {"sk": "APPROVAL_DECISION", "approved": True, "written_at": "2026-11-30T09:02:30.000Z"},
            {"sk": "PURCHASE_INTENT", "written_at": "2026-11-30T09:03:00.000Z"},
            {"sk": "PURCHASE", "upfront_fee_usd": "1000.00", "written_at": "2026-11-30T09:03:00.000Z"},
            *_history(SERVED),
        ],
        plans=[PlanFact("co-soak", "us-east-1", "Expired", Decimal("1000.00"), END)],
        billable=[],
        slack=["*soak RELEASED* (reservation-end)"],
    )
    return replace(facts, **changes)


def _without(facts: Facts, sk: str) -> list[dict[str, Any]]:
    return [item for item in facts.items if item["sk"] != sk]


def test_a_lifecycle_that_kept_every_rule_has_no_violation() -> None:
    facts = _facts()
    assert check(facts) == []
    assert outcome(facts) == "RELEASED"


def test_double_purchase_fires_on_two_training_plans_and_on_two_purchased_entries() -> None:
    second = PlanFact("co-soak", "us-west-2", "Scheduled", Decimal("900.00"), END)
    two_plans = _facts(plans=[*_facts().plans, second])
    assert check_double_purchase(two_plans) == [
        "double purchase: 2 training plans bought "
        "(co-soak in us-east-1 $1000.00; co-soak in us-west-2 $900.00)"
    ]
    twice = _facts(items=[*_facts().items, _state(59, "PURCHASED", money_usd="1000.00")])
    assert check_double_purchase(twice) == ["double purchase: PURCHASED recorded 2 times in the ledger"]
    failed_plan = PlanFact("co-soak", "us-west-2", "Failed", Decimal("900.00"), END)
    # A Failed plan cost nothing.
    assert check_double_purchase(_facts(plans=[*_facts().plans, failed_plan])) == []


def test_budget_fires_on_a_plan_or_a_recorded_amount_above_the_budget() -> None:
    dear = _facts(plans=[PlanFact("co-soak", "us-east-1", "Active", Decimal("1500.01"), END)])
    assert check_budget(dear) == [
        "purchase above budget: co-soak costs $1500.01 > max_upfront_fee_usd $1500.00"
    ]
    recorded = _facts(max_upfront_fee_usd=Decimal("999.99"))
    problems = check_budget(recorded)
    assert len(problems) == 2
    assert "PURCHASED records $1000.00 > max_upfront_fee_usd $999.99" in problems[1]


def test_approval_fires_without_a_decision_on_a_rejection_or_on_a_late_approval() -> None:
    facts = _facts()
    missing = _facts(items=_without(facts, "APPROVAL_DECISION"))
    assert check_approval(missing) == [
        "purchase without approval: $1000.00 > approval_above_usd $500.00 and no APPROVAL_DECISION"
    ]
    rejection = {"sk": "APPROVAL_DECISION", "approved": False, "written_at": "2026-11-30T09:02:30.000Z"}
    rejected = _facts(items=[*_without(facts, "APPROVAL_DECISION"), rejection])
    assert "the APPROVAL_DECISION is a rejection" in check_approval(rejected)[0]
    late = {"sk": "APPROVAL_DECISION", "approved": True, "written_at": "2026-11-30T09:03:00.001Z"}
    after = _facts(items=[*_without(facts, "APPROVAL_DECISION"), late])
    assert "came after the purchase (2026-11-30T09:03:00.000Z)" in check_approval(after)[0]
    below_threshold = _facts(items=missing.items, approval_above_usd=Decimal("1000.00"))
    assert check_approval(below_threshold) == []  # $1,000 is not above a $1,000 threshold


def test_approval_fires_on_a_purchase_in_a_dry_run_or_after_a_rejection() -> None:
    assert check_approval(_facts(dry_run=True)) == ["purchase in a dry run: co-soak"]
    rejected_first = _facts(items=[*_facts().items, _state(1, "REJECTED")])
    assert check_approval(rejected_first) == [
        "purchase after rejection: REJECTED at 2026-11-30T09:01:00.000Z, bought at 2026-11-30T09:03:00.000Z"
    ]


def test_billable_fires_on_a_leftover_endpoint_unless_a_stuck_deletion_was_reported() -> None:
    left = ["endpoint co-soak (InService, us-east-1)"]
    problems = check_billable(_facts(billable=left))
    assert len(problems) == 1
    assert "billable resource left after its reservation's end (plan end 2026-12-20T11:30:00Z" in problems[0]
    assert "endpoint co-soak (InService, us-east-1)" in problems[0]
    assert "no stuck fault fired" in problems[0]
    reported = [*_facts().slack, "*soak RELEASE FAILED* (ReleaseStuck): endpoint co-soak (Deleting)"]
    assert check_billable(_facts(billable=left, stuck_fired=True, slack=reported)) == []
    assert check_billable(_facts(billable=left, stuck_fired=True)) != []  # stuck but nobody was told
    assert check_billable(_facts(billable=left, slack=reported)) != []  # told, but AWS was not stuck


def test_final_state_fires_on_a_lifecycle_left_in_flight_or_unfinished() -> None:
    in_flight = _facts(items=_history(SERVED[:8]))
    assert check_final_state(in_flight) == [
        "lifecycle ends without a final ledger state: REQUESTED -> PLANNED -> AWAITING_APPROVAL -> PURCHASED "
        "-> SCHEDULED -> ACTIVE -> DEPLOYING -> READY",
        "a purchase that never ended released: REQUESTED -> PLANNED -> AWAITING_APPROVAL -> PURCHASED -> "
        "SCHEDULED -> ACTIVE -> DEPLOYING -> READY",
    ]
    assert outcome(in_flight) == "NO_FINAL(READY)"
    unfinished = _facts(finished=False, unfinished_reason="still running after 120 s of real time (bound)")
    assert check_final_state(unfinished) == [
        "lifecycle did not finish: still running after 120 s of real time (bound)"
    ]
    assert outcome(unfinished) == "UNFINISHED"
    cancelled_not_released = _facts(items=_history([*SERVED[:4], "CANCELLED"]))
    assert check_final_state(cancelled_not_released) == [
        "a purchase that never ended released: "
        "REQUESTED -> PLANNED -> AWAITING_APPROVAL -> PURCHASED -> CANCELLED"
    ]
    accepted_nothing = _facts(items=[], plans=[])
    assert check_final_state(accepted_nothing) == [
        "lifecycle ends without a final ledger state: the request was accepted, nothing recorded"
    ]


def test_final_state_accepts_the_legitimate_ends() -> None:
    release_failed = _history([*SERVED[:9], "FAILED"])
    release_failed[-1]["detail"] = {"phase": "release", "error": "ReleaseStuck"}
    assert check_final_state(_facts(items=release_failed)) == []
    dry_run = _history(["REQUESTED", "PLANNED"])
    dry_run[-1]["detail"] = {"decision": "DRY_RUN"}
    assert check_final_state(_facts(items=dry_run, plans=[], dry_run=True)) == []
    never_accepted = _facts(items=[], plans=[], accepted=False)
    assert check_final_state(never_accepted) == []
    assert outcome(never_accepted) == "NOT_ACCEPTED"
    rejected = _facts(items=_history(["REQUESTED", "PLANNED", "REJECTED"]), plans=[])
    assert check(rejected) == []


def test_failure_without_a_notification_fires() -> None:
    failed = _history(["REQUESTED", "PLANNED", "FAILED"])
    failed[-1]["detail"] = {"error": "CapacityUnavailable"}
    silent = _facts(items=failed, plans=[], slack=["*Decision for soak: PURCHASE*"])
    assert check_failures_notified(silent) == [
        "failure without a notification: FAILED at 2026-11-30T09:02:00.000Z (CapacityUnavailable) and no "
        "Slack message containing 'soak FAILED' or 'Decision for soak: NO_OFFERING'"
    ]
    told = _facts(items=failed, plans=[], slack=["*soak FAILED* (CapacityUnavailable): no capacity."])
    assert check_failures_notified(told) == []
    release = _history([*SERVED[:9], "FAILED"])
    release[-1]["detail"] = {"phase": "release", "error": "ReleaseStuck"}
    only_generic = _facts(items=release, slack=["*soak FAILED* (ReleaseStuck)"])
    assert "'soak RELEASE FAILED'" in check_failures_notified(only_generic)[0]


def test_scenarios_are_reproducible_from_the_seed_and_differ_between_lifecycles() -> None:
    assert make_scenario(7, 3) == make_scenario(7, 3)
    drawn = [make_scenario(7, i) for i in range(40)]
    assert len({s.seed for s in drawn}) == 40
    assert {s.approval for s in drawn} >= {"approve", "reject", "timeout", "late", "after_timeout"}
    assert any(a.kind == "cancel" for s in drawn for a in s.actions)
    assert any(a.kind == "bus" for s in drawn for a in s.actions)
    assert any(s.budget_factor < 1 for s in drawn)
    assert any(s.budget_factor > 1 for s in drawn)
    kinds = {rule.kind.value for s in drawn for rule in s.faults}
    assert kinds == {kind.value for kind in FaultKind}  # every kind the local cloud can inject
    leads = {s.request["earliest_start"][:10] for s in drawn}
    assert len(leads) > 20


def test_a_third_of_the_lifecycles_are_ec2_and_some_start_within_the_hour() -> None:
    drawn = [make_scenario(1, i) for i in range(200)]
    ec2 = [s for s in drawn if s.request.get("platform") == "ec2"]
    assert len(ec2) == 55  # seed 1: 55 of 200 (EC2_SHARE is 1/3)
    for scenario in ec2:
        request = scenario.request
        assert request["instance_type"] in CAPACITY_BLOCK_TYPES
        assert request["duration_hours"] % 24 == 0
        assert request["duration_hours"] <= 336
        assert request["earliest_start"] < "2027-01-21"  # START + 50 days + 23 h: inside the 8 weeks
        assert request["launch_template"] == {"name": "soak-workers", "version": "$Latest"}
        assert "models" not in request
    ec2_faults = {(r.service, r.operation, r.kind.value) for s in ec2 for r in s.faults}
    assert ("ec2", "PurchaseCapacityBlock", "payment_failed") in ec2_faults
    assert ("ec2", "PurchaseCapacityBlock", "crash_after_commit") in ec2_faults
    assert ("ec2", "RunInstances", "insufficient_capacity") in ec2_faults
    assert not {r.service for s in ec2 for r in s.faults} & {"sagemaker", "application-auto-scaling"}
    soon = [s for s in drawn if s.request["earliest_start"].startswith("2026-11-30T09:")]
    assert len(soon) == 35
    assert {s.request.get("strategy") for s in soon} == {None, "on-demand-first", "spot-ok"}
    assert all(s.request.get("platform") == "ec2" for s in soon if s.request.get("strategy") == "spot-ok")
    # Half the spot-ok lifecycles find no on-demand capacity anywhere, so their spot tries run.
    no_on_demand = [
        s.index for s in soon if any(r.match == {"InstanceMarketOptions": None} for r in s.faults)
    ]
    assert no_on_demand == [49, 75, 105, 119, 164]
    rule = next(r for r in drawn[49].faults if r.match)
    assert rule.applies_to("ec2", "RunInstances", {"MinCount": 1, "MaxCount": 1})
    assert not rule.applies_to("ec2", "RunInstances", {"InstanceMarketOptions": {"MarketType": "spot"}})


def test_capacity_blocks_count_as_purchases_and_a_payment_failed_block_does_not() -> None:
    block = PlanFact(
        "cr-0123456789abcdef0", "us-west-2", "expired", Decimal("1200.00"), END, "capacity-block"
    )
    two = _facts(plans=[*_facts().plans, block])
    assert check_double_purchase(two) == [
        "double purchase: 2 reservations (training plans and capacity blocks) bought "
        "(co-soak in us-east-1 $1000.00; cr-0123456789abcdef0 in us-west-2 $1200.00)"
    ]
    blocks = _facts(plans=[block, replace(block, name="cr-1", region="us-east-1", status="scheduled")])
    assert check_double_purchase(blocks)[0].startswith("double purchase: 2 capacity blocks bought")
    unpaid = replace(block, status="payment-failed")
    assert check_double_purchase(_facts(plans=[*_facts().plans, unpaid])) == []
    # A block's upfront fee is checked against the budget and the approval threshold like a plan's.
    assert check_budget(_facts(plans=[block], items=_history(SERVED[:3]))) == []  # $1,200 is within $1,500
    assert check_budget(_facts(plans=[replace(block, upfront_fee_usd=Decimal("1500.01"))])) == [
        "purchase above budget: cr-0123456789abcdef0 costs $1500.01 > max_upfront_fee_usd $1500.00"
    ]
    no_decision = _facts(plans=[block], items=_without(_facts(), "APPROVAL_DECISION"))
    assert check_approval(no_decision) == [
        "purchase without approval: $1200.00 > approval_above_usd $500.00 and no APPROVAL_DECISION"
    ]
    # A block bought and then never released is a purchase that never ended released.
    stopped = _facts(plans=[block], items=_history([*SERVED[:4], "FAILED"]))
    assert "a purchase that never ended released" in check_final_state(stopped)[0]


def _on_demand(market: str = "on-demand", rate: str = "55.04", hours: int = 10) -> dict[str, Any]:
    end = datetime(2026, 11, 30, 9, 0, tzinfo=UTC) + timedelta(hours=hours)
    return {
        "sk": "PURCHASE",
        "market": market,
        "region": "us-east-1",
        "instance_type": "p5.48xlarge",
        "instance_count": 2,
        "on_demand_usd_per_hour": rate,
        "upfront_fee_usd": "0",
        "start_time": "2026-11-30T09:00:00Z",
        "end_time": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def test_on_demand_spend_is_held_to_the_budget_and_to_the_approval_threshold() -> None:
    served = _history(["REQUESTED", "PLANNED", "DEPLOYING", "READY", "RELEASING", "RELEASED"])
    # 2 x $55.04/h for 10 h = $1,100.80: within the $1,500 budget, above the $500 threshold.
    base = _facts(items=[*served, _on_demand()], plans=[], approval_above_usd=None)
    assert on_demand_spend(base) == (
        "2 x p5.48xlarge on on-demand in us-east-1 at $55.04/h from 2026-11-30T09:00:00Z to "
        "2026-11-30T19:00:00Z",
        Decimal("1100.80"),
    )
    assert check(base) == []
    assert route(
        {"platform": "ec2", "strategy": "spot-ok", "earliest_start": "2026-11-30T09:10:00Z"}, base
    ) == ("ec2 spot-ok -> on-demand")
    above_threshold = replace(base, approval_above_usd=Decimal("500.00"))
    assert check_approval(above_threshold) == [
        "on demand without approval: 2 x p5.48xlarge on on-demand in us-east-1 at $55.04/h from "
        "2026-11-30T09:00:00Z to 2026-11-30T19:00:00Z costs $1100.80 > approval_above_usd $500.00 (on demand "
        "asks no approval: it must reserve instead)"
    ]
    dear = _facts(items=[*served, _on_demand("spot", hours=14)], plans=[], approval_above_usd=None)
    assert check_budget(dear) == [
        "on demand above budget: 2 x p5.48xlarge on spot in us-east-1 at $55.04/h from 2026-11-30T09:00:00Z "
        "to 2026-11-30T23:00:00Z costs $1541.12 > max_upfront_fee_usd $1500.00"
    ]
    dry = replace(base, dry_run=True)
    assert check_approval(dry)[0].startswith("launched on demand in a dry run: 2 x p5.48xlarge")
    # A training plan's PURCHASE item (no market) is not on-demand spend.
    assert (
        on_demand_spend(_facts(items=[*_facts().items, {"sk": "PURCHASE", "upfront_fee_usd": "1000"}]))
        is None
    )


# ---------------------------------------------------------------- the invariants of issue 12, item 7


def test_the_total_spend_counts_every_reservation_bought() -> None:
    two = [PlanFact("co-soak", "us-east-1", "Active", Decimal("800.00"), END)] * 2
    assert check_total_spend(_facts(plans=two)) == ["total spend $1600.00 > max_upfront_fee_usd $1500.00"]
    assert check_total_spend(_facts()) == []


def test_the_ledgers_money_must_equal_what_aws_charged() -> None:
    uncharged = [PlanFact("co-soak", "us-east-1", "Failed", Decimal("1000.00"), END)]
    assert check_money_recorded(_facts(plans=uncharged)) == [
        "ledger money $1000.00 != what AWS charged $0 (0 bought)"
    ]
    # A reversal recorded with the failure balances it
    reversal = _state(40, "FAILED", money_usd="-1000.00")
    assert check_money_recorded(_facts(plans=uncharged, items=[*_facts().items, reversal])) == []


def test_a_purchase_needs_its_record_and_its_release_schedule() -> None:
    facts = _facts()
    assert check_money_recorded(replace(facts, items=_without(facts, "PURCHASE"))) == [
        "bought without a PURCHASE record: co-soak"
    ]
    assert check_money_recorded(replace(facts, release_scheduled=False)) == [
        "bought without a release schedule: co-soak"
    ]


def test_a_paid_reservation_is_not_thrown_away() -> None:
    rejected = _history(["REQUESTED", "PLANNED", "PURCHASED", "REJECTED"])
    transient = [
        *_history(["REQUESTED", "PLANNED", "PURCHASED"]),
        _state(9, "FAILED", detail={"error": "RetryableAwsError"}),
    ]
    genuine = [
        *_history(["REQUESTED", "PLANNED", "PURCHASED"]),
        _state(9, "FAILED", detail={"error": "PlanFailed"}),
    ]
    assert check_paid_kept(_facts(items=rejected)) == [
        f"paid, then REJECTED at {rejected[-1]['at']} without serving"
    ]
    assert check_paid_kept(_facts(items=transient)) == [
        "paid, then FAILED on a transient fault (RetryableAwsError) without serving"
    ]
    assert check_paid_kept(_facts(items=genuine)) == []
    aborted = _facts(
        items=_history(["REQUESTED", "PLANNED", "PURCHASED"]),
        executions=[("ReserveCapacityStateMachine", "ABORTED")],
    )
    assert check_paid_kept(aborted) == [
        "paid, then the reserve workflow was aborted and the reservation never served"
    ]
    assert check_paid_kept(_facts(executions=[("ReserveCapacityStateMachine", "ABORTED")])) == []  # it served
    resumed = _facts(
        items=[
            *_history(["REQUESTED", "PLANNED", "PURCHASED"]),
            {"sk": "RESUME#arn:stopped", "execution": "x"},
        ],
        executions=[("ReserveCapacityStateMachine", "ABORTED"), ("ReserveCapacityStateMachine", "FAILED")],
    )
    assert check_paid_kept(resumed) == []  # carried on by a resumed workflow: judged by the other rules


def test_an_accepted_cancel_is_honoured_and_releases_soon() -> None:
    cancel = datetime(2026, 11, 30, 9, 6, 30, tzinfo=UTC)  # after READY (09:07 is RELEASING)
    served = _facts(cancels_accepted=[cancel])
    assert check_cancel_honoured(served) == [
        "cancel accepted at 2026-11-30T09:06:30Z but the reservation never ended CANCELLED"
    ]
    items = [*_facts().items, _state(8, "CANCELLED")]
    assert check_cancel_honoured(_facts(items=items, cancels_accepted=[cancel])) == []
    late = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
    problems = check_cancel_honoured(_facts(items=items, cancels_accepted=[late]))
    assert problems == [
        "cancel accepted at 2026-11-30T01:00:00Z: released only at 2026-11-30T09:09:00.000Z "
        "(more than 6:00:00 later)"
    ]


def test_an_approval_by_the_requester_or_below_what_was_bought_is_a_violation() -> None:
    facts = _facts(requester="alice@example.com")
    approvals = [i for i in facts.items if i["sk"] != "APPROVAL_DECISION"]
    own = [*approvals, {"sk": "APPROVAL_DECISION", "approved": True, "approver": "alice@example.com"}]
    assert check_approval_decision(replace(facts, items=own)) == [
        "approved by its own requester alice@example.com"
    ]
    cheaper = [*facts.items, {"sk": "APPROVAL", "plan": {"offering": {"upfront_fee_usd": "900.00"}}}]
    assert check_approval_decision(replace(facts, items=cheaper)) == [
        "bought $1000.00, more than the $900.00 that was approved"
    ]
    assert check_approval_decision(facts) == []


def test_every_copy_change_needs_its_ledger_record() -> None:
    scale = {
        "sk": "SCALE#2026-11-30T09:08:00.000Z#m#idle",
        "inference_component_name": "co-soak-m",
        "to_copies": 0,
    }
    facts = _facts(copy_changes=[("co-soak-m", 0), ("co-soak-m", 3)], items=[*_facts().items, scale])
    assert check_copies_recorded(facts) == ["copy count changed without a ledger record: co-soak-m -> 3"]
    # A successor's components are scaled in the successor's ledger (seed 417 #45 was reported otherwise).
    successor_scale = {**scale, "inference_component_name": "co-soak-r2-m"}
    chain = _facts(copy_changes=[("co-soak-r2-m", 0)], successors={"soak-r2": [successor_scale]})
    assert check_copies_recorded(chain) == []


def test_a_fifth_of_the_serve_until_lifecycles_at_least_are_drawn_to_roll_over() -> None:
    drawn = [make_scenario(1, i) for i in range(300)]
    serving = [s for s in drawn if s.request.get("serve_until")]
    rolling = [s for s in serving if (s.listing or {}).get("rolls_over")]
    assert len(rolling) * 5 >= len(serving), (len(rolling), len(serving))
    for scenario in rolling:
        request = scenario.request
        assert len(request["regions"]) >= 2
        assert request["latest_end"][11:16] == "11:30"  # one start: the window's first 11:30 UTC
        first = f"{request['regions'][0]}/*"
        listing = scenario.listing or {}
        end = date.fromisoformat(request["latest_end"][:10])
        # sold out from the end, or from a day later for the chains drawn to extend by a day first
        extra = timedelta(days=1) if listing.get("extends_first") else timedelta(0)
        assert listing["sold_out"][first][0] == (end + extra).isoformat()
        if not any(a.kind == "patch" for a in scenario.actions):  # an approver's PATCH asks approvals
            assert (scenario.approval, scenario.approval_factor) == ("none", None)
            assert not any(a.kind in ("approve", "reject") for a in scenario.actions)
        assert scenario.budget_factor > 1  # the first and a successor reaching serve_until
    assert any((s.listing or {}).get("extends_first") for s in rolling)
    assert not all((s.listing or {}).get("extends_first") for s in rolling)


def test_an_extension_is_bought_once_recorded_with_its_fee_and_counted_in_the_budget() -> None:
    paid = ExtensionFact("co-soak", "tpe-1", Decimal("300.00"), 24, "succeeded")
    extended = {  # while READY, before the release
        **_state(7, "EXTENDED", money_usd="300.00", detail={"extension_id": "tpe-0", "offering_id": "tpe-1"}),
        "sk": "STATE#2026-11-30T09:07:30.000Z#0000",
    }
    kept = _facts(extensions=[paid], items=[*_facts().items, extended])
    assert check(kept) == []  # $1,000 + $300 within $1,500; the ledger holds both amounts

    assert check_extensions(_facts(extensions=[paid, paid], items=[*_facts().items, extended])) == [
        "double extension: offering tpe-1 bought 2 times"
    ]
    assert check_extensions(_facts(extensions=[paid], items=[*_facts().items, extended, extended])) == [
        "double extension: EXTENDED recorded 2 times for tpe-0"
    ]
    assert check_extensions(_facts(extensions=[paid])) == [
        "extension not recorded: tpe-1 of co-soak paid $300.00, ledger says nothing"
    ]
    assert check_money_recorded(_facts(extensions=[paid])) == [
        "ledger money $1000.00 != what AWS charged $1300.00 (1 bought)"
    ]
    dear = ExtensionFact("co-soak", "tpe-2", Decimal("600.00"), 24, "pending")
    assert check_total_spend(_facts(extensions=[dear])) == [
        "total spend $1600.00 > max_upfront_fee_usd $1500.00"
    ]
    refused = replace(dear, payment="failed")  # a failed payment charged nothing
    assert check_total_spend(_facts(extensions=[refused])) == []
    assert check_extensions(_facts(extensions=[refused])) == []


def test_a_quarter_of_the_lifecycles_extend_some_of_them_twice() -> None:
    drawn = [make_scenario(7, i) for i in range(200)]
    # (not counting those asked close to the release: test_some_lifecycles_extend_close_to_the_release)
    extending = [[a for a in s.actions if a.kind == "extend" and a.phase != "RELEASE"] for s in drawn]
    share = sum(1 for found in extending if found) / len(drawn)
    assert 0.15 < share < 0.35
    assert any(len(found) == 2 for found in extending)  # a client sending the purchase twice
    assert {a.phase for found in extending for a in found} == {"PURCHASED", "ACTIVE", "READY"}


# ------------------------------------------------------------------------- keep looking, brought (issue 17)

DEADLINE = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)


def _looked(*tail: tuple[int, str, dict[str, Any]]) -> list[dict[str, Any]]:
    """REQUESTED, SEARCHING at 09:01 and 09:10, then ``tail`` as (minute, state, detail)."""
    items = [_state(0, "REQUESTED"), _state(1, "SEARCHING"), _state(10, "SEARCHING")]
    return items + [_state(minute, state, detail=detail) for minute, state, detail in tail]


def test_a_purchase_outside_the_window_is_a_violation() -> None:
    window = (datetime(2026, 12, 14, 11, 30, tzinfo=UTC), END)
    inside = PlanFact("co-soak", "us-east-1", "Expired", Decimal("1000.00"), END, start_time=window[0])
    assert check_window(_facts(plans=[inside], window=window)) == []
    early = replace(inside, start_time=window[0] - timedelta(days=1))
    assert check_window(_facts(plans=[early], window=window)) == [
        "bought outside the window: co-soak runs 2026-12-13T11:30:00Z to 2026-12-20T11:30:00Z, the request's "
        "window is 2026-12-14T11:30:00Z to 2026-12-20T11:30:00Z"
    ]
    # An extension paid later moves the end past the window: the requester's choice, not the purchase's.
    extended = replace(inside, end_time=END + timedelta(days=1))
    paid = ExtensionFact("co-soak", "tpe-1", Decimal("300.00"), 24, "succeeded")
    assert check_window(_facts(plans=[extended], window=window, extensions=[paid])) == []
    assert "then extended" not in check_window(_facts(plans=[extended], window=window))[0]


def test_keep_looking_looks_until_the_deadline_and_tells_at_the_deadline_not_before() -> None:
    told = _looked((30, "FAILED", {"error": "SearchDeadlinePassed"}))
    quiet = _facts(items=told, plans=[], search_until=DEADLINE)
    assert check_keep_looking(quiet) == []
    early = _facts(items=_looked((20, "FAILED", {"error": "SearchDeadlinePassed"})), search_until=DEADLINE)
    assert check_keep_looking(early) == [
        "told before the deadline: FAILED SearchDeadlinePassed at 2026-11-30T09:20:00.000Z, search_until "
        "2026-11-30T09:30:00Z"
    ]
    gave_up = _facts(items=_looked((12, "FAILED", {"error": "OfferingNotFound"})), search_until=DEADLINE)
    assert "gave up looking: FAILED OfferingNotFound" in check_keep_looking(gave_up)[0]
    rejected = _facts(items=_looked((12, "REJECTED", {"error": "BudgetExceeded"})), search_until=DEADLINE)
    assert "gave up looking: REJECTED over budget" in check_keep_looking(rejected)[0]
    late = _facts(items=_looked((45, "SEARCHING", {}), (50, "FAILED", {})), search_until=DEADLINE)
    assert check_keep_looking(late) == [
        "looked after the deadline: SEARCHING at 2026-11-30T09:45:00.000Z, search_until 2026-11-30T09:30:00Z"
    ]
    after_cancel = _facts(items=_looked((11, "CANCELLED", {}), (12, "SEARCHING", {})), search_until=DEADLINE)
    assert check_keep_looking(after_cancel) == [
        "looked after the outcome: SEARCHING at 2026-11-30T09:12:00.000Z after CANCELLED"
    ]
    # Without search_until (or in a dry run) giving up at once is the rule, not a violation.
    assert check_keep_looking(replace(gave_up, search_until=None)) == []


def test_a_brought_reservation_is_never_bought_and_never_charged_to_the_request() -> None:
    brought = PlanFact("central-p5", "us-east-1", "Expired", Decimal("9000.00"), END)
    summary = {"brought": True, "upfront_fee_usd": "0"}
    history = _history(
        ["REQUESTED", "PLANNED", "PURCHASED", "ACTIVE", "DEPLOYING", "READY", "RELEASING", "RELEASED"]
    )
    history[2]["money_usd"] = "0"
    history[-1]["detail"] = {"summary": summary}
    clean = _facts(
        items=[{"sk": "PURCHASE", "brought": True, "upfront_fee_usd": "0"}, *history],
        plans=[brought],
        brought="central-p5",
        approval_above_usd=None,
    )
    # Someone else's $9,000 plan is not the request's purchase: above its $1,500 budget, no violation.
    assert clean.live_plans() == []
    assert check(clean) == []
    bought_too = replace(clean, purchase_calls=1)
    assert check_brought(bought_too) == ["brought central-p5, yet the application called to buy 1 times"]
    charged = [dict(i) for i in clean.items]
    charged[0]["upfront_fee_usd"] = "9000.00"
    charged[-1] = {**charged[-1], "detail": {"summary": {"brought": False, "upfront_fee_usd": "9000.00"}}}
    problems = check_brought(replace(clean, items=charged))
    assert problems == [
        "brought central-p5, but PURCHASE records brought=True and a fee of $9000.00",
        "brought central-p5, but the cost summary says brought=False, paid $9000.00",
    ]


def test_a_fifth_keep_looking_and_some_bring_their_own_reservation() -> None:
    drawn = [make_scenario(1, i) for i in range(200)]
    looking = [s for s in drawn if s.request.get("search_until")]
    assert len(looking) == 34  # seed 1 (KEEP_LOOKING_SHARE 0.2)
    assert all(s.listing is not None for s in looking)
    listings = [s.listing or {} for s in looking]
    later = [x for x in listings if "listed_from" in x and x["listed_from"]["*"] < "2027"]
    assert later
    assert [x for x in listings if "listed_from" in x and x["listed_from"]["*"] >= "2027"]  # never
    assert [x for x in listings if "churn" in x]
    for scenario in looking:
        latest_start = datetime.fromisoformat(scenario.request["latest_end"]) - timedelta(
            hours=scenario.request["duration_hours"]
        )
        assert datetime.fromisoformat(scenario.request["search_until"]) <= latest_start
    assert any(a.phase == "SEARCHING" and a.kind == "cancel" for s in looking for a in s.actions)
    bringing = [s for s in drawn if s.brings]
    assert len(bringing) == 8
    assert not any(s.request.get("dry_run") or s.request.get("strategy") for s in bringing)
    assert not {s.index for s in looking} & {s.index for s in bringing}


def test_what_keeping_looking_came_to_is_summed_up() -> None:
    assert looking(_facts()) is None  # no search_until
    bought = _facts(items=[*_looked(), *_history(SERVED[1:])], search_until=DEADLINE)
    assert looking(bought) == "bought after 3 looks"
    told = _facts(
        items=_looked((30, "FAILED", {"error": "SearchDeadlinePassed"})), plans=[], search_until=DEADLINE
    )
    assert looking(told) == "told at the deadline"
    cancelled = _facts(items=_looked((12, "CANCELLED", {})), plans=[], search_until=DEADLINE)
    assert looking(cancelled) == "cancelled while looking"


def _rolled_over(**changes: Any) -> Facts:
    """A lifecycle that rolled over (serve_until): ``soak`` ($1,000) released ``rolled-over`` after its
    successor ``soak-r2`` ($400) served; the chain's budget is $1,500."""
    successor = [
        {"sk": "REQUEST", "written_at": "2026-11-30T09:20:00.000Z"},
        *_history(["REQUESTED", "PLANNED", "PURCHASED", "READY"]),
    ]
    successor[3] = {**successor[3], "money_usd": "400.00"}
    successor[-1] = {**successor[-1], "at": "2026-11-30T09:30:00.000Z"}
    successor.append(_state(40, "RELEASED"))
    root = [i for i in _facts().items if not str(i["sk"]).startswith("STATE#")]
    served = _history(SERVED[:8])
    released = [_state(35, "RELEASING", detail={"reason": "rolled-over"}), _state(36, "RELEASED")]
    facts = _facts(
        items=[
            *root,
            {"sk": "SUCCESSOR", "successor_id": "soak-r2"},
            {"sk": "ROLLED_OVER"},
            *served,
            *released,
        ],
        plans=[
            PlanFact("co-soak", "us-east-1", "Expired", Decimal("1000.00"), END, owner="soak"),
            PlanFact("co-soak-r2", "us-west-2", "Expired", Decimal("400.00"), END, owner="soak-r2"),
        ],
        successors={"soak-r2": successor},
    )
    return replace(facts, **changes)


def test_a_roll_over_that_kept_the_money_rules_has_no_violation() -> None:
    facts = _rolled_over()
    assert check(facts) == []
    assert keep_serving(facts) == "rolled-over"


def test_roll_over_checks_fire_on_a_second_purchase_a_budget_overrun_and_an_early_release() -> None:
    twice = _rolled_over()
    twice.plans.append(
        PlanFact("co-soak-r2", "eu-west-1", "Expired", Decimal("400.00"), END, owner="soak-r2")
    )
    assert "roll-over: 2 reservations bought for soak-r2" in check_rollovers(twice)
    assert "roll-over: soak-r2's ledger money $400.00 != what AWS charged $800.00" in check_rollovers(twice)
    assert "roll-over: the chain spent $1800.00 > max_upfront_fee_usd $1500.00" in check_rollovers(twice)
    stranger = _rolled_over()
    stranger.plans.append(PlanFact("co-other", "us-east-1", "Expired", Decimal("1.00"), END, owner="other"))
    assert check_rollovers(stranger) == [
        "roll-over: reservations bought for requests outside the chain: other"
    ]
    early = _rolled_over()
    early.successors["soak-r2"] = [i for i in early.successors["soak-r2"] if i.get("state") != "READY"]
    assert check_rollovers(early) == ["roll-over: soak released rolled-over before a successor served"]
    unfinished = _rolled_over()
    unfinished.successors["soak-r2"] = [
        i for i in unfinished.successors["soak-r2"] if i.get("state") != "RELEASED"
    ]
    assert check_rollovers(unfinished) == ["roll-over: soak-r2 has no final state (READY)"]


def test_a_fifth_of_the_lifecycles_keep_serving_past_their_reservation() -> None:
    drawn = [make_scenario(402, index).request for index in range(200)]
    kept = [r for r in drawn if r.get("serve_until")]
    assert 25 <= len(kept) <= 55
    assert not any(r.get("dry_run") for r in kept)
    for request in kept:
        start = datetime.fromisoformat(request["earliest_start"].replace("Z", "+00:00"))
        until = datetime.fromisoformat(request["serve_until"].replace("Z", "+00:00"))
        assert until - start - timedelta(hours=request["duration_hours"]) > timedelta(hours=22)


# ------------------------------------------------------------- money for hours nothing served (issue 28)

START_PLAN = END - timedelta(days=3)


def _at(moment: datetime, state: str, n: int = 0, **extra: Any) -> dict[str, Any]:
    at = moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return {"sk": f"STATE#{at}#{n:04d}", "state": state, "at": at, "actor": "test", "detail": {}, **extra}


def _released_at(moment: datetime, reason: str = "reservation-end") -> list[dict[str, Any]]:
    return [
        _at(START_PLAN - timedelta(days=1), "PURCHASED", money_usd="1000.00"),
        _at(START_PLAN + timedelta(minutes=10), "READY"),
        _at(moment, "RELEASING", detail={"reason": reason}),
        _at(moment + timedelta(minutes=5), "RELEASED"),
    ]


def _plan(name: str, start: datetime, end: datetime, owner: str = "soak") -> PlanFact:
    return PlanFact(name, "us-east-1", "Expired", Decimal("1000.00"), end, owner=owner, start_time=start)


def test_no_money_is_paid_for_hours_after_the_release_began() -> None:
    extended_end = END + timedelta(days=1)
    extension = ExtensionFact(
        "co-soak", "tpe-1", Decimal("300.00"), 24, "succeeded", start=END, end=extended_end
    )
    plan = _plan("co-soak", START_PLAN, extended_end)
    # Released at the old end's margin although the extension was paid: a day paid for nothing
    early = _facts(plans=[plan], chain_extensions=[extension], items=_released_at(END - timedelta(hours=1)))
    assert check_no_idle_money(early) == [
        "money for hours nothing served: co-soak (extended by 24 h) of soak paid until "
        "2026-12-21T11:30:00Z, its release (reservation-end) began at 2026-12-20T10:30:00Z: 1 day, 1:00:00 "
        "after it, 1:00:00 allowed"
    ]
    # Released at the new end's margin: nothing idle
    on_time = _facts(
        plans=[plan], chain_extensions=[extension], items=_released_at(extended_end - timedelta(hours=1))
    )
    assert check_no_idle_money(on_time) == []
    # A cancel asked for the early release: the requester's choice
    cancelled = [
        _at(END - timedelta(hours=2), "CANCELLED"),
        *_released_at(END - timedelta(hours=1), "cancelled"),
    ]
    assert check_no_idle_money(_facts(plans=[plan], chain_extensions=[extension], items=cancelled)) == []


def test_an_extension_and_a_successor_never_pay_for_the_same_hours() -> None:
    extended_end = END + timedelta(days=1)
    extension = ExtensionFact(
        "co-soak", "tpe-1", Decimal("300.00"), 24, "succeeded", start=END, end=extended_end
    )
    first = _plan("co-soak", START_PLAN, extended_end)
    # The successor starts a day before the extended end: the extension's day is paid twice
    overlapping = _plan("co-soak-r2", END, END + timedelta(days=3), owner="soak-r2")
    successor = {"soak-r2": [{"sk": "REQUEST", "request": {"release_margin_minutes": 60}}]}
    facts = _facts(
        plans=[first, overlapping],
        chain_extensions=[extension],
        successors=successor,
        items=_released_at(extended_end - timedelta(hours=1)),
    )
    problems = check_no_idle_money(facts)
    assert any(p.startswith("extend and succeed both: extension tpe-1 of soak") for p in problems)
    assert any(p.startswith("money for hours paid twice: soak-r2") for p in problems)
    # Starting at the extended end: a hand-over, nothing paid twice
    after = _plan("co-soak-r2", extended_end, extended_end + timedelta(days=3), owner="soak-r2")
    assert check_no_idle_money(replace(facts, plans=[first, after])) == []
    # Without an extension, a successor starting the day before the end is the market's 11:30 step
    plain = _plan("co-soak", START_PLAN, END)
    day_before = _plan("co-soak-r2", END - timedelta(days=1), END + timedelta(days=2), owner="soak-r2")
    rolled = _released_at(END - timedelta(days=1, minutes=-20), "rolled-over")
    assert (
        check_no_idle_money(replace(facts, plans=[plain, day_before], chain_extensions=[], items=rolled))
        == []
    )
    # Unless a person asked for that extension (recorded)
    asked = [
        *facts.items,
        {"sk": "EXTENSION_CALL#tpe-1#2026-12-18T09:00:00.000Z", "offering": {"offering_id": "tpe-1"}},
        {"sk": "EXTENSION_INTENT#tpe-1", "requester": "arn:aws:iam::123456789012:user/soak"},
    ]
    assert not any(
        p.startswith("extend and succeed both") for p in check_no_idle_money(replace(facts, items=asked))
    )


def test_an_approver_who_changed_serve_until_never_decides_what_follows() -> None:
    approver = "arn:aws:sts::123456789012:assumed-role/Approvers/soak-approver"
    patched = {
        "sk": "SERVE_UNTIL#2026-11-30T10:00:00.000Z",
        "actor": approver,
        "written_at": "2026-11-30T10:00:00.000Z",
    }
    decided = {
        "sk": "EXTENSION_DECISION#tpe-1",
        "approved": True,
        "approver": approver,
        "written_at": "2026-11-30T11:00:00.000Z",
    }
    before = {**decided, "sk": "APPROVAL_DECISION", "written_at": "2026-11-30T09:02:30.000Z"}
    facts = _facts(items=[*_facts().items, patched, decided, before])
    assert check_causers_do_not_approve(facts) == [
        f"EXTENSION_DECISION#tpe-1 of soak decided by {approver}, who changed serve_until of soak: whoever "
        "causes spend may not approve it"
    ]
    # A successor's approval by that approver is the same
    successor = {
        "soak-r2": [{"sk": "REQUEST", "request": {}}, {**before, "written_at": "2026-11-30T12:00:00.000Z"}]
    }
    assert (
        len(check_causers_do_not_approve(_facts(items=[*_facts().items, patched], successors=successor))) == 1
    )
    # And the API answering such an approval 200 is reported too
    accepted = _facts(causer_approvals_accepted=["/reservations/soak-r2/approval"])
    assert check_causers_do_not_approve(accepted) == [
        "approval by a causer accepted: /reservations/soak-r2/approval answered 200 to the approver who "
        "changed serve_until"
    ]


def test_an_invalid_delivery_changes_nothing() -> None:
    recorded = {"sk": "REQUEST", "request": {"max_upfront_fee_usd": "1500.00"}}
    kept = _facts(invalid_deliveries=["other-budget"], items=[*_without(_facts(), "REQUEST"), recorded])
    assert check_invalid_deliveries(kept) == []
    changed = {"sk": "REQUEST", "request": {"max_upfront_fee_usd": "15000.00"}}
    assert check_invalid_deliveries(replace(kept, items=[*_without(_facts(), "REQUEST"), changed])) == [
        "an invalid delivery changed the request: its budget reads $15000.00, $1500.00 was accepted"
    ]
    failed = _state(59, "FAILED", detail={"error": "InvalidRequest"})
    assert check_invalid_deliveries(replace(kept, items=[*kept.items, failed])) == [
        "an invalid delivery (other-budget) ended the request: FAILED InvalidRequest at "
        "2026-11-30T09:59:00.000Z"
    ]


def test_every_lifecycle_draws_at_least_once_delivery_kindness_faults_and_other_buyers() -> None:
    drawn = [make_scenario(601, i) for i in range(60)]
    for scenario in drawn:
        kinds = {(f.service, f.kind) for f in scenario.faults}
        for service in ("eventbridge", "scheduler", "lambda"):
            assert (service, FaultKind.DUPLICATE_DELIVERY) in kinds
            assert (service, FaultKind.DELAYED_DELIVERY) in kinds
        assert ("dynamodb", FaultKind.TRANSACTION_CONFLICT) in kinds
        if scenario.request.get("platform") == "ec2":
            assert ("ec2", FaultKind.STALE_LISTING) in kinds
        assert 0.05 <= scenario.competition[0] <= 0.3
    kinds_drawn = {a.kind for s in drawn for a in s.actions}
    assert {"bus_invalid", "extend_any"} <= kinds_drawn | {"extend_any"}
    assert any(a.phase == "RELEASE" and a.delay_hours < 0 for s in drawn for a in s.actions)
