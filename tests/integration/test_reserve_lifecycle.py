"""Whole reservation lifecycles on the local cloud (issue 3's acceptance): the application's own template,
state machines and Lambdas, against the emulated capacity market, on the virtual clock."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from capacity.record_kinds import STATE_PREFIX, USAGE

from localcloud.emulator.market import MarketConfig
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import (
    APPROVER,
    LIFECYCLE,
    START,
    api_event,
    base_request,
    in_order,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
    training_plans,
)

pytestmark = pytest.mark.integration


def test_happy_path_buys_once_serves_releases_and_leaves_nothing() -> None:
    with make_cloud() as cloud:
        response = post_reservation(cloud, base_request())
        assert response["statusCode"] == 202
        assert response["json"]["request_id"] == "eval-week-49"

        cloud.run_until_idle()

        seen = states(cloud, "eval-week-49")
        assert in_order(seen, LIFECYCLE), seen
        items = ledger_items(cloud, "eval-week-49")
        stamped = [item for item in items if item["sk"].startswith(STATE_PREFIX)]
        assert all(item["at"].endswith("Z") for item in stamped)
        assert [item["at"] for item in stamped] == sorted(item["at"] for item in stamped)
        plans = training_plans(cloud)
        assert len(plans) == 1
        assert plans[0]["TrainingPlanName"] == "co-eval-week-49"
        assert cloud.billable_resources() == []
        purchased = next(item for item in stamped if item["state"] == "PURCHASED")
        assert Decimal(purchased["money_usd"]) == Decimal(plans[0]["UpfrontFee"])
        assert Decimal(purchased["money_usd"]) <= Decimal("12000")
        released = next(item for item in stamped if item["state"] == "RELEASED")
        assert released["at"] < plans[0]["EndTime"].strftime("%Y-%m-%dT%H:%M:%S")
        statuses = {e.state_machine.rsplit("-", 1)[-1]: e.status for e in cloud.executions()}
        assert statuses == {
            "ReserveCapacityStateMachine": "SUCCEEDED",
            "ReleaseCapacityStateMachine": "SUCCEEDED",
        }
        assert "RELEASED" in slack_texts(cloud)
        # The instance count over time (issue 16): the plan's InUseInstanceCount when the activation poll
        # found it Active (0: nothing deployed yet), then the endpoint's CurrentInstanceCount at READY.
        usage = [(i["source"], i["instances"]) for i in items if i["sk"].startswith(f"{USAGE}#")]
        assert usage[:2] == [("training-plan", "0"), ("ready", "1")], usage
        active = next(item for item in stamped if item["state"] == "ACTIVE")
        plan_seen = next(
            i for i in items if i["sk"].startswith(f"{USAGE}#") and i["source"] == "training-plan"
        )
        assert plan_seen["sk"].split("#")[1] == active["at"]
        summary = released["detail"]["summary"]  # the 0 before service does not count in service
        assert (summary["instance_hours_used"], summary["instance_hours_reserved"]) == ("70.82", "144.00")
        assert summary["effective_usd_per_served_instance_hour"] == "28.11"


def test_over_budget_is_rejected_and_nothing_is_bought() -> None:
    body = {**base_request(), "max_upfront_fee_usd": "900"}
    body.pop("approval_above_usd")
    with make_cloud() as cloud:
        post_reservation(cloud, body)
        cloud.run_until_idle()
        assert states(cloud, "eval-week-49")[-1] == "REJECTED"
        assert training_plans(cloud) == []


def _awaiting(cloud: object, request_id: str) -> bool:
    return "AWAITING_APPROVAL" in states(cloud, request_id)  # type: ignore[arg-type]


def test_rejected_approval_buys_nothing() -> None:
    body = {**base_request(), "approval_above_usd": "1000"}
    with make_cloud() as cloud:
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: _awaiting(cloud, "eval-week-49"))
        answer = cloud.api_request(
            api_event(
                {"approved": False, "reason": "not this week"},
                path="/reservations/eval-week-49/approval",
                caller=APPROVER,
            )
        )
        assert answer["statusCode"] == 200, answer
        cloud.run_until_idle()
        assert states(cloud, "eval-week-49")[-1] == "REJECTED"
        assert training_plans(cloud) == []


def test_approval_that_never_comes_times_out_and_buys_nothing() -> None:
    body = {**base_request(), "approval_above_usd": "1000", "approval_timeout_hours": 2}
    with make_cloud() as cloud:
        post_reservation(cloud, body)
        cloud.run_until_idle()
        assert states(cloud, "eval-week-49")[-1] == "REJECTED"
        assert training_plans(cloud) == []
        assert cloud.now() >= START + timedelta(hours=2)


def test_late_approval_meets_an_expired_offering_searches_once_more_and_buys_once() -> None:
    body = {**base_request(), "approval_above_usd": "1000"}
    with make_cloud() as cloud:
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: _awaiting(cloud, "eval-week-49"))
        # The offering id is valid for 30 minutes after the search; the approver answers after 3 hours.
        cloud.run(until=cloud.now() + timedelta(hours=3))
        answer = cloud.api_request(
            api_event({"approved": True}, path="/reservations/eval-week-49/approval", caller=APPROVER)
        )
        assert answer["statusCode"] == 200, answer
        cloud.run_until_idle()
        searches = [r for r in cloud.lambdas.records if r.function.endswith("SearchOfferingsFunction")]
        assert len(searches) == 3  # one per region; the re-search happens inside the purchase
        assert len(training_plans(cloud)) == 1
        assert "RELEASED" in states(cloud, "eval-week-49")
        assert cloud.billable_resources() == []


def test_no_offering_fails_and_names_the_alternatives() -> None:
    # Two instances never fit (one per pool), so only alternatives with other counts exist.
    market = MarketConfig(capacity={"*/ml.p5.48xlarge": 1})
    with make_cloud(market=market) as cloud:
        post_reservation(cloud, base_request())
        cloud.run_until_idle()
        items = ledger_items(cloud, "eval-week-49")
        failed = [item for item in items if item.get("state") == "FAILED"]
        assert len(failed) == 1
        reason = json.dumps(failed[0]["detail"])
        assert "alternative" in reason.lower()
        assert training_plans(cloud) == []


def test_quota_error_is_reported_as_quota_not_as_no_capacity() -> None:
    market = MarketConfig(training_plan_quotas={"*/ml.p5.48xlarge": 1})
    with make_cloud(market=market) as cloud:
        post_reservation(cloud, base_request())
        cloud.run_until_idle()
        failed = [item for item in ledger_items(cloud, "eval-week-49") if item.get("state") == "FAILED"]
        assert len(failed) == 1
        assert "quota" in json.dumps(failed[0]["detail"]).lower()
        assert training_plans(cloud) == []


def test_the_same_request_delivered_five_times_buys_once() -> None:
    with make_cloud() as cloud:
        responses = [post_reservation(cloud, base_request()) for _ in range(3)]
        assert {r["statusCode"] for r in responses} == {202}
        event = json.loads(api_event(base_request())["body"])
        entry = {
            "Source": "capacity.orchestrator",
            "DetailType": "ReservationRequested",
            "Detail": json.dumps({"schema_version": 1, "request": event}),
            "EventBusName": cloud.stack.physical_id("EventBus"),
        }
        cloud.put_events([entry, entry])  # two more deliveries straight onto the bus, past the API
        cloud.run_until_idle()
        assert len(training_plans(cloud)) == 1
        assert states(cloud, "eval-week-49").count("PURCHASED") == 1
        assert states(cloud, "eval-week-49").count("RELEASED") == 1
        assert cloud.billable_resources() == []


def test_crash_after_commit_on_create_training_plan_buys_once() -> None:
    faults = FaultInjector(
        [
            FaultRule(
                service="sagemaker",
                operation="CreateTrainingPlan",
                kind=FaultKind.CRASH_AFTER_COMMIT,
                times=1,
            )
        ]
    )
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run_until_idle()
        assert [f.kind for f in faults.fired] == [FaultKind.CRASH_AFTER_COMMIT]
        assert len(training_plans(cloud)) == 1
        assert states(cloud, "eval-week-49").count("PURCHASED") == 1
        assert "RELEASED" in states(cloud, "eval-week-49")


def test_thirty_percent_throttling_still_completes_the_lifecycle() -> None:
    # Every emulated AWS API the lifecycle calls, and the ledger's DynamoDB, throttle 30% of the time.
    faults = FaultInjector(
        [
            FaultRule(service=service, kind=FaultKind.THROTTLE, probability=0.3)
            for service in ("sagemaker", "dynamodb", "scheduler", "eventbridge")
        ],
        seed=11,
    )
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run_until_idle()
        assert len(faults.fired) >= 10
        assert in_order(states(cloud, "eval-week-49"), LIFECYCLE)
        assert len(training_plans(cloud)) == 1
        assert cloud.billable_resources() == []


def test_a_failed_plan_is_recorded_notified_and_leaves_nothing() -> None:
    faults = FaultInjector(
        [FaultRule(service="sagemaker", operation="CreateTrainingPlan", kind=FaultKind.INSUFFICIENT_CAPACITY)]
    )
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run_until_idle()
        seen = states(cloud, "eval-week-49")
        assert "FAILED" in seen
        assert "READY" not in seen
        assert "FAILED" in slack_texts(cloud)
        assert cloud.billable_resources() == []
        reserve = [e for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")]
        assert [e.status for e in reserve] == ["FAILED"]


def _transitions(lead_days: int) -> int:
    body = base_request()
    start = START + timedelta(days=lead_days)
    body.update(
        earliest_start=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        latest_end=(start + timedelta(days=5)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    with make_cloud(market=MarketConfig(max_lead=timedelta(days=90))) as cloud:
        post_reservation(cloud, body)
        cloud.run_until_idle()
        assert "RELEASED" in states(cloud, "eval-week-49")
        return sum(e.transitions for e in cloud.executions())


def test_state_transitions_do_not_grow_with_the_lead_time() -> None:
    one_day, sixty_days = _transitions(1), _transitions(60)
    assert abs(one_day - sixty_days) <= 2, (one_day, sixty_days)


def test_cancel_right_after_the_202_before_the_request_is_recorded_buys_nothing() -> None:
    with make_cloud() as cloud:
        post_reservation(cloud, base_request())
        cancel = cloud.api_request(api_event(None, method="DELETE", path="/reservations/eval-week-49"))
        assert cancel["statusCode"] == 202, cancel
        assert json.loads(cancel["body"])["status"] == "CANCELLED"
        cloud.run_until_idle()
        assert states(cloud, "eval-week-49") == ["REQUESTED", "CANCELLED"]
        assert training_plans(cloud) == []
        unknown = cloud.api_request(api_event(None, method="DELETE", path="/reservations/never-posted"))
        assert unknown["statusCode"] == 404


def test_cancel_while_awaiting_approval_leaves_one_final_state_and_one_release() -> None:
    body = {**base_request(), "approval_above_usd": "1000"}
    path = "/reservations/eval-week-49"
    with make_cloud() as cloud:
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: _awaiting(cloud, "eval-week-49"))
        first = cloud.api_request(api_event(None, method="DELETE", path=path))
        second = cloud.api_request(api_event(None, method="DELETE", path=path))
        assert (first["statusCode"], second["statusCode"]) == (202, 202)
        cloud.run_until_idle()
        final = [s for s in states(cloud, "eval-week-49") if s in ("CANCELLED", "REJECTED", "FAILED")]
        assert final == ["CANCELLED"]
        assert training_plans(cloud) == []
        releases = [e for e in cloud.executions() if "Release" in e.state_machine]
        assert len(releases) <= 1
