"""Extending a reservation in place on the local cloud (issue 17 items 1 and 3): the application's own
template, API, workflow and Lambdas against the emulator's extension APIs, on the virtual clock."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.record_kinds import EXTENSION, EXTENSION_INTENT, EXTENSION_OUTCOME, STATE_PREFIX

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from localcloud_soak.checks import check_budget, check_double_purchase
from localcloud_soak.facts import collect_facts
from tests.integration.support import (
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
    training_plans,
)

pytestmark = pytest.mark.integration
RID = "eval-week-49"
ROOMY = MarketConfig(capacity={"*": 8})
"""Every pool holds 8 instances: the plan can always be extended by a day."""


def extensions(cloud: LocalCloud, body: dict[str, Any], request_id: str = RID) -> dict[str, Any]:
    """``POST /reservations/{id}/extensions``; the proxy response with ``json`` parsed."""
    path = f"/reservations/{request_id}/extensions"
    event = api_event(body, path=path)
    event["resource"] = "/reservations/{request_id}/extensions"
    event["requestContext"]["resourcePath"] = event["resource"]
    response = cloud.api_request(event)
    response["json"] = json.loads(response["body"]) if response.get("body") else None
    return response


def ready(cloud: LocalCloud) -> dict[str, Any]:
    """Run until the reservation is READY; its PURCHASE item."""
    post_reservation(cloud, base_request())
    cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
    assert "READY" in states(cloud, RID)
    return next(item for item in ledger_items(cloud, RID) if item["sk"] == "PURCHASE")


def extended(cloud: LocalCloud) -> list[dict[str, Any]]:
    return [
        i for i in ledger_items(cloud, RID) if i["sk"].startswith(STATE_PREFIX) and i["state"] == "EXTENDED"
    ]


def succeeded(cloud: LocalCloud, operation: str) -> list[Any]:
    return [
        c
        for c in cloud.dispatcher.calls
        if c.operation == operation and c.status is not None and c.status < 300
    ]


def extension_outcome(cloud: LocalCloud) -> dict[str, Any]:
    """Run until the extension's ``EXTENSION_OUTCOME#`` is recorded; that item."""

    def outcomes() -> list[dict[str, Any]]:
        return [i for i in ledger_items(cloud, RID) if i["sk"].startswith(f"{EXTENSION_OUTCOME}#")]

    cloud.run(stop_when=lambda: bool(outcomes()))
    (outcome,) = outcomes()
    return outcome


def release_at(cloud: LocalCloud) -> datetime:
    """When the release schedule fires (its latest definition)."""
    calls = [
        c
        for c in succeeded(cloud, "CreateSchedule") + succeeded(cloud, "UpdateSchedule")
        if str(c.params.get("Name", "")).endswith(f"{RID}-release")
    ]
    calls.sort(key=lambda c: c.at)
    return datetime.fromisoformat(str(calls[-1].params["ScheduleExpression"])[3:-1] + "+00:00")


def buy_one_day(cloud: LocalCloud) -> dict[str, Any]:
    dry = extensions(cloud, {"duration_hours": 24})
    assert dry["statusCode"] == 200, dry
    (offer,) = dry["json"]["offerings"]
    assert offer["allowed"] is True
    bought = extensions(cloud, {"duration_hours": 24, "offering_id": offer["offering_id"]})
    assert bought["statusCode"] == 202, bought
    assert bought["json"]["status"] == "EXTENSION_REQUESTED"
    return dict(offer)


def test_a_training_plan_extended_by_a_day_serves_until_the_new_end_and_records_the_fee_once() -> None:
    with make_cloud(market=ROOMY) as cloud:
        purchase = ready(cloud)
        old_end = datetime.fromisoformat(purchase["end_time"].replace("Z", "+00:00"))
        old_release = release_at(cloud)
        offer = buy_one_day(cloud)
        assert offer["start_time"] == purchase["end_time"]
        assert Decimal(offer["on_demand_equivalent_usd"]) > Decimal(offer["upfront_fee_usd"])
        cloud.run(stop_when=lambda: bool(extended(cloud)))
        (entry,) = extended(cloud)
        assert Decimal(entry["money_usd"]) == Decimal(offer["upfront_fee_usd"])
        assert entry["detail"]["end_time"] == (old_end + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert release_at(cloud) == old_release + timedelta(days=1)
        (plan,) = training_plans(cloud)
        assert plan["EndTime"] == old_end + timedelta(days=1)
        assert "Extended eval-week-49" in slack_texts(cloud)

        endpoint = next(
            i for i in ledger_items(cloud, RID) if i["sk"].startswith(STATE_PREFIX) and i["state"] == "READY"
        )
        name = endpoint["detail"]["endpoint_name"]
        cloud.run(until=old_end + timedelta(hours=2))
        assert "RELEASING" not in states(cloud, RID)  # still serving after the old end
        plan_now = cloud.client("sagemaker").describe_training_plan(TrainingPlanName=plan["TrainingPlanName"])
        assert plan_now["Status"] == "Active"
        component = endpoint["detail"]["inference_component_names"][0]
        runtime = cloud.client("sagemaker-runtime")

        def invoke() -> int:
            try:
                answer = runtime.invoke_endpoint(
                    EndpointName=name,
                    InferenceComponentName=component,
                    Body=b"{}",
                    ContentType="application/json",
                )
            except runtime.exceptions.ValidationError:
                return 0  # scaled to zero while idle: this request brings a copy back (scale-out from zero)
            return int(answer["ResponseMetadata"]["HTTPStatusCode"])

        if invoke() != 200:
            cloud.run(until=cloud.now() + timedelta(minutes=15))
        assert invoke() == 200  # served after the old end: the scale-out follows the extended end

        cloud.run_until_idle()
        items = ledger_items(cloud, RID)
        released = next(i for i in items if i["sk"].startswith(STATE_PREFIX) and i["state"] == "RELEASED")
        assert old_end + timedelta(hours=2) < datetime.fromisoformat(released["at"].replace("Z", "+00:00"))
        assert released["at"] < plan["EndTime"].strftime("%Y-%m-%dT%H:%M:%S")
        assert cloud.billable_resources() == []
        assert len(extended(cloud)) == 1
        assert len(succeeded(cloud, "ExtendTrainingPlan")) == 1
        facts = collect_facts(cloud, base_request())
        assert check_double_purchase(facts) == []
        assert check_budget(facts) == []


def test_an_extension_delivered_twice_and_a_lambda_killed_after_the_call_buy_once() -> None:
    faults = FaultInjector(
        [FaultRule(service="sagemaker", operation="ExtendTrainingPlan", kind=FaultKind.KILL_CALLER, times=1)]
    )
    with make_cloud(market=ROOMY, faults=faults) as cloud:
        ready(cloud)
        offer = buy_one_day(cloud)
        again = extensions(cloud, {"duration_hours": 24, "offering_id": offer["offering_id"]})
        assert again["statusCode"] in (202, 409), again  # the same choice: one extension either way
        cloud.run(stop_when=lambda: bool(extended(cloud)))
        cloud.run(until=cloud.now() + timedelta(hours=1))
        assert any(f.kind is FaultKind.KILL_CALLER for f in cloud.faults.fired)
        assert len(succeeded(cloud, "ExtendTrainingPlan")) == 1
        (entry,) = extended(cloud)
        assert Decimal(entry["money_usd"]) == Decimal(offer["upfront_fee_usd"])
        history = cloud.client("sagemaker").describe_training_plan_extension_history(
            TrainingPlanArn=training_plans(cloud)[0]["TrainingPlanArn"]
        )["TrainingPlanExtensions"]
        assert len(history) == 1


def test_a_failed_extension_payment_keeps_the_old_end_and_release_and_says_so() -> None:
    faults = FaultInjector(
        [FaultRule(service="sagemaker", operation="ExtendTrainingPlan", kind=FaultKind.PAYMENT_FAILED)]
    )
    with make_cloud(market=ROOMY, faults=faults) as cloud:
        purchase = ready(cloud)
        old_release = release_at(cloud)
        buy_one_day(cloud)
        outcome = extension_outcome(cloud)
        assert outcome["outcome"] == "failed"
        assert outcome["end_time"] == purchase["end_time"]
        assert extended(cloud) == []
        assert release_at(cloud) == old_release
        assert training_plans(cloud)[0]["EndTime"].strftime("%Y-%m-%dT%H:%M:%SZ") == purchase["end_time"]
        assert f"Extension of {RID} FAILED" in slack_texts(cloud)
        assert purchase["end_time"][:16].replace("T", " ") in slack_texts(cloud)


def test_an_extension_above_the_budget_is_refused_before_any_call() -> None:
    with make_cloud(market=ROOMY) as cloud:
        purchase = ready(cloud)
        too_long = extensions(cloud, {"duration_hours": 24 * 30})
        assert too_long["statusCode"] == 200
        (offer,) = too_long["json"]["offerings"]
        assert offer["allowed"] is False
        assert "above the budget" in offer["problem"]
        refused = extensions(cloud, {"duration_hours": 24 * 30, "offering_id": offer["offering_id"]})
        assert refused["statusCode"] == 409
        assert "above the budget" in refused["json"]["message"]
        stale = extensions(cloud, {"duration_hours": 24, "offering_id": "tpeo-stale"})
        assert stale["statusCode"] == 409
        assert "a fresh search found: tpeo-" in stale["json"]["message"]
        assert succeeded(cloud, "ExtendTrainingPlan") == []
        assert purchase["end_time"]


def test_a_capacity_block_extended_by_a_day_keeps_its_instances_until_the_new_end() -> None:
    from tests.integration.test_ec2_capacity_blocks import (
        REQUEST_ID,
        blocks,
        create_launch_templates,
        ec2_request,
        instances,
    )

    market = MarketConfig(
        capacity={"*": 8, "us-west-2/p5.48xlarge": 0, "eu-west-1/p5.48xlarge": 0}, offerings_page_size=5
    )
    with make_cloud(market=market) as cloud:
        create_launch_templates(cloud)
        post_reservation(cloud, ec2_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, REQUEST_ID))
        (block,) = blocks(cloud)
        old_end = block["EndDate"]
        dry = extensions(cloud, {"duration_hours": 24}, request_id=REQUEST_ID)
        assert dry["statusCode"] == 200, dry
        (offer,) = dry["json"]["offerings"]
        bought = extensions(cloud, {"duration_hours": 24, "offering_id": offer["offering_id"]}, REQUEST_ID)
        assert bought["statusCode"] == 202, bought
        cloud.run(
            stop_when=lambda: any(
                i["sk"].startswith(STATE_PREFIX) and i["state"] == "EXTENDED"
                for i in ledger_items(cloud, REQUEST_ID)
            ),
        )
        (block,) = blocks(cloud)
        assert block["EndDate"] == old_end + timedelta(days=1)
        cloud.run(until=old_end + timedelta(hours=1))
        assert "RELEASING" not in states(cloud, REQUEST_ID)  # no release on the old end's warning
        assert {i["State"]["Name"] for i in instances(cloud)} == {"running"}
        cloud.run_until_idle()
        items = ledger_items(cloud, REQUEST_ID)
        released = next(i for i in items if i["sk"].startswith(STATE_PREFIX) and i["state"] == "RELEASED")
        assert released["at"] < block["EndDate"].strftime("%Y-%m-%dT%H:%M:%S")
        assert {i["State"]["Name"] for i in instances(cloud)} == {"terminated"}
        assert len(succeeded(cloud, "PurchaseCapacityBlockExtension")) == 1
        fee = next(i for i in items if i["sk"].startswith(STATE_PREFIX) and i["state"] == "EXTENDED")[
            "money_usd"
        ]
        assert Decimal(fee) == Decimal(offer["upfront_fee_usd"])


def _team_spent(cloud: LocalCloud, team: str, month: str) -> Decimal:
    from capacity.adapters.policy_store import PolicyStore

    return PolicyStore(cloud.stack.physical_id("PolicyTable"), cloud.client("dynamodb")).spent(month, team)


def test_an_extension_counts_against_the_team_month_it_is_bought_in_and_is_refused_past_what_is_left() -> (
    None
):
    from capacity.adapters.policy_store import PolicyStore

    with make_cloud(market=ROOMY) as cloud:
        purchase = ready(cloud)  # bought in November (the clock starts on 2026-11-29), extended in December
        paid = Decimal(purchase["upfront_fee_usd"])
        assert _team_spent(cloud, "ml-platform", "2026-11") == paid
        offer = buy_one_day(cloud)
        cloud.run(stop_when=lambda: bool(extended(cloud)))
        fee = Decimal(offer["upfront_fee_usd"])
        month = f"{cloud.now().year:04d}-{cloud.now().month:02d}"
        assert month == "2026-12"
        assert _team_spent(cloud, "ml-platform", month) == fee  # the extension's fee is its team's too
        assert _team_spent(cloud, "ml-platform", "2026-11") == paid

        store = PolicyStore(cloud.stack.physical_id("PolicyTable"), cloud.client("dynamodb"))
        team = store.team("ml-platform")
        assert team is not None
        room = fee + fee / 2  # half of another day's fee left in December
        smaller = {**team.model_dump(), "monthly_budget_usd": room, "approval_above_usd": room}
        store.put_team(type(team).model_validate(smaller), actor="test", now=cloud.now())
        dry = extensions(cloud, {"duration_hours": 24})
        assert dry["statusCode"] == 200, dry
        (again,) = dry["json"]["offerings"]
        assert again["allowed"] is False
        assert "team ml-platform has" in again["problem"]
        assert "left in December 2026" in again["problem"]
        refused = extensions(cloud, {"duration_hours": 24, "offering_id": again["offering_id"]})
        assert refused["statusCode"] == 409, refused
        assert "team ml-platform has" in refused["json"]["message"]
        assert len(succeeded(cloud, "ExtendTrainingPlan")) == 1
        assert _team_spent(cloud, "ml-platform", month) == fee


def test_an_extension_whose_call_keeps_failing_is_told_and_gives_the_team_its_fee_back() -> None:
    faults = FaultInjector(
        [FaultRule(service="sagemaker", operation="ExtendTrainingPlan", kind=FaultKind.SERVER_ERROR)]
    )
    with make_cloud(market=ROOMY, faults=faults) as cloud:
        purchase = ready(cloud)
        old_release = release_at(cloud)
        buy_one_day(cloud)
        outcome = extension_outcome(cloud)
        assert outcome["outcome"] == "failed"
        assert outcome["reason"].startswith("nothing was bought (")  # with the last error AWS gave
        assert extended(cloud) == []
        assert release_at(cloud) == old_release
        said = slack_texts(cloud)
        assert f"Extension of {RID} FAILED" in said
        assert f"{RID} still ends at {purchase['end_time']}" in said
        month = f"{cloud.now().year:04d}-{cloud.now().month:02d}"
        assert _team_spent(cloud, "ml-platform", month) == 0  # the held fee went back
        statuses = [e.status for e in cloud.executions() if "ExtendCapacity" in e.state_machine]
        assert statuses == ["FAILED"]


def put_extension_requested(cloud: LocalCloud, offer: dict[str, Any]) -> None:
    """Another system puts ``ExtensionRequested`` for a dry run's ``offer`` (no door checked it)."""
    listed_only = ("allowed", "problem", "approval_required")
    detail = {
        "request_id": RID,
        "extension_id": offer["offering_id"],
        "requester": "pipeline@example.com",
        "offering": {k: v for k, v in offer.items() if k not in listed_only},
    }
    entry = {
        "Source": "capacity.orchestrator",
        "DetailType": "ExtensionRequested",
        "Detail": json.dumps(detail),
        "EventBusName": cloud.stack.physical_id("EventBus"),
    }
    cloud.client("events").put_events(Entries=[entry])


def test_an_extension_event_the_rules_refuse_is_told_to_its_sender() -> None:
    with make_cloud(market=ROOMY) as cloud:
        ready(cloud)
        too_long = extensions(cloud, {"duration_hours": 24 * 30})
        (offer,) = too_long["json"]["offerings"]
        assert offer["allowed"] is False  # above the budget: the API refuses it; an event may still ask
        put_extension_requested(cloud, offer)
        cloud.run(stop_when=lambda: f"Extension of {RID} FAILED" in slack_texts(cloud))
        said = slack_texts(cloud)
        assert "nothing was bought (BudgetExceeded" in said, said
        assert succeeded(cloud, "ExtendTrainingPlan") == []
        started = (
            f"{EXTENSION_INTENT}#",
            f"{EXTENSION}#",
            f"{EXTENSION_OUTCOME}#",
        )  # the dry run's offers aside
        assert not [i for i in ledger_items(cloud, RID) if i["sk"].startswith(started)]
