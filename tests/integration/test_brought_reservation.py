"""Bring your own reservation (issue 17 item 5) on the local cloud: a training plan bought by someone else
(central procurement, through the emulator's own CreateTrainingPlan) is checked, served on and released,
and nothing is bought or charged to the request or its team; a plan that does not fit, is not paid yet, is
another request's or is in use is refused at the API door naming the field; a brought plan is not extended
by the request; a brought capacity block runs the instances and its expiry warning releases them."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.record_kinds import STATE_PREFIX

from localcloud.cloud import LocalCloud
from tests.integration.support import (
    START,
    api_event,
    base_request,
    in_order,
    ledger_items,
    make_cloud,
    post_reservation,
    states,
)
from tests.integration.test_ec2_capacity_blocks import ONLY_US_EAST_1, create_launch_templates, ec2_request

pytestmark = pytest.mark.integration

REGION = "us-east-1"
PLAN_NAME = "central-procurement-p5"


def _buy_elsewhere(cloud: LocalCloud, *, paid: bool = True) -> str:
    """Central procurement buys a 72 h endpoint plan of 2 x ml.p5.48xlarge (SearchTrainingPlanOfferings +
    CreateTrainingPlan, as any buyer would) and, if ``paid``, waits until it is paid (Scheduled); returns its
    ARN."""
    sagemaker = cloud.client("sagemaker", REGION)
    found = sagemaker.search_training_plan_offerings(
        InstanceType="ml.p5.48xlarge",
        InstanceCount=2,
        StartTimeAfter=START + timedelta(days=7),
        EndTimeBefore=START + timedelta(days=14),
        DurationHours=72,
        TargetResources=["endpoint"],
    )["TrainingPlanOfferings"]
    assert found, "the emulated market offers no plan to buy elsewhere"
    arn: str = sagemaker.create_training_plan(
        TrainingPlanName=PLAN_NAME, TrainingPlanOfferingId=found[0]["TrainingPlanOfferingId"]
    )["TrainingPlanArn"]
    if paid:
        cloud.run(until=cloud.now() + timedelta(hours=1))  # the payment is processed while time passes
        assert sagemaker.describe_training_plan(TrainingPlanName=PLAN_NAME)["Status"] == "Scheduled"
    return arn


def _brought_request(cloud: LocalCloud, arn: str) -> dict[str, Any]:
    plan = cloud.client("sagemaker", REGION).describe_training_plan(TrainingPlanName=PLAN_NAME)
    body = {**base_request(), "request_id": "brought-plan", "training_plan_arn": arn}
    body["earliest_start"] = plan["StartTime"].strftime("%Y-%m-%dT%H:%M:%SZ")
    body["latest_end"] = plan["EndTime"].strftime("%Y-%m-%dT%H:%M:%SZ")
    return body


def _creates(cloud: LocalCloud) -> int:
    return len([c for c in cloud.dispatcher.calls if c.operation == "CreateTrainingPlan"])


def test_a_brought_plan_is_served_and_released_and_nothing_is_bought() -> None:
    with make_cloud() as cloud:
        arn = _buy_elsewhere(cloud)
        assert _creates(cloud) == 1  # central procurement's, before the request
        response = post_reservation(cloud, _brought_request(cloud, arn))
        assert response["statusCode"] == 202, response["json"]

        ready: dict[str, Any] = {}

        def is_ready() -> bool:
            if "READY" not in states(cloud, "brought-plan"):
                return False
            sagemaker = cloud.client("sagemaker", REGION)
            ready["components"] = sagemaker.list_inference_components()["InferenceComponents"]
            ready["endpoints"] = sagemaker.list_endpoints()["Endpoints"]
            return True

        cloud.run(stop_when=is_ready)
        assert [e["EndpointStatus"] for e in ready["endpoints"]] == ["InService"]
        assert sorted(c["InferenceComponentStatus"] for c in ready["components"]) == ["InService"] * 2
        cloud.run_until_idle()

        seen = states(cloud, "brought-plan")
        assert in_order(seen, ["REQUESTED", "PURCHASED", "ACTIVE", "READY", "RELEASING", "RELEASED"]), seen
        assert "PLANNED" not in seen, seen
        assert "FAILED" not in seen, seen
        assert _creates(cloud) == 1  # the product bought nothing
        items = {item["sk"]: item for item in ledger_items(cloud, "brought-plan")}
        assert "PURCHASE_INTENT" not in items
        purchase = items["PURCHASE"]
        assert (purchase["training_plan_arn"], purchase["upfront_fee_usd"], purchase["brought"]) == (
            arn,
            "0",
            True,
        )
        stamped = [i for i in items.values() if i["sk"].startswith(STATE_PREFIX)]
        purchased = next(i for i in stamped if i["state"] == "PURCHASED")
        assert Decimal(purchased["money_usd"]) == 0
        assert purchased["detail"]["brought"] is True
        summary = next(i for i in stamped if i["state"] == "RELEASED")["detail"]["summary"]
        assert summary["brought"] is True
        assert Decimal(summary["upfront_fee_usd"]) == 0
        assert cloud.billable_resources() == []
        # The plan itself is central procurement's: still there, untouched by the release.
        plan = cloud.client("sagemaker", REGION).describe_training_plan(TrainingPlanName=PLAN_NAME)
        assert plan["TrainingPlanArn"] == arn
        got = cloud.api_request(api_event(None, method="GET", path="/reservations/brought-plan"))
        body = json.loads(got["body"])
        assert (body["purchase"]["brought"], body["purchase"]["upfront_fee_usd"]) == (True, "0")
        assert body["spend"]["paid_usd"] == "0.00", body["spend"]
        # No team hold: the policy table (team month, account month, quota holds) never heard of it.
        policy = cloud.client("dynamodb").scan(TableName=cloud.stack.physical_id("PolicyTable"))["Items"]
        assert not [item for item in policy if "brought-plan" in json.dumps(item)], policy


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"instance_type": "ml.p4d.24xlarge"}, "instance_type", "holds ml.p5.48xlarge"),
        ({"training_plan_arn": "missing"}, "training_plan_arn", "no training plan"),
    ],
)
def test_a_brought_plan_that_does_not_fit_is_refused_naming_the_field(
    change: dict[str, str], field: str, says: str
) -> None:
    with make_cloud() as cloud:
        arn = _buy_elsewhere(cloud)
        body = _brought_request(cloud, arn)
        if change.get("training_plan_arn") == "missing":
            change = {"training_plan_arn": arn.replace(PLAN_NAME, "no-such-plan")}
        body.update(change)
        for model in body["models"]:  # fit the models to the other type, so only the plan is wrong
            model.update(accelerators=1, cpu_cores=4, memory_mb=16384)
        response = post_reservation(cloud, body)
        assert response["statusCode"] == 422, response["json"]
        errors = {e["field"]: e["message"] for e in response["json"]["errors"]}
        assert field in errors, errors
        assert says in errors[field], errors
        assert "nothing was bought" in errors[field]
        cloud.run_until_idle()
        assert states(cloud, "brought-plan") == []
        assert _creates(cloud) == 1


def test_a_brought_plan_cannot_be_extended_by_the_request() -> None:
    with make_cloud() as cloud:
        arn = _buy_elsewhere(cloud)
        assert post_reservation(cloud, _brought_request(cloud, arn))["statusCode"] == 202
        cloud.run(stop_when=lambda: "READY" in states(cloud, "brought-plan"))
        event = api_event({"duration_hours": 24}, path="/reservations/brought-plan/extensions")
        event["resource"] = event["requestContext"]["resourcePath"] = "/reservations/{request_id}/extensions"
        refused = cloud.api_request(event)
        assert refused["statusCode"] == 409, refused
        assert "ask its owner to extend it" in json.loads(refused["body"])["message"]
        assert not [
            c
            for c in cloud.dispatcher.calls
            if c.operation == "SearchTrainingPlanOfferings" and c.params.get("TrainingPlanArn")
        ]


def _refusal(response: dict[str, Any], field: str) -> str:
    assert response["statusCode"] == 422, response["json"]
    errors = {e["field"]: e["message"] for e in response["json"]["errors"]}
    assert field in errors, errors
    return str(errors[field])


def test_a_plan_not_yet_paid_or_outside_the_window_is_refused() -> None:
    with make_cloud() as cloud:
        sagemaker = cloud.client("sagemaker", REGION)
        arn = _buy_elsewhere(cloud, paid=False)
        body = _brought_request(cloud, arn)
        assert "is Pending" in _refusal(post_reservation(cloud, body), "training_plan_arn")
        cloud.run(until=cloud.now() + timedelta(hours=1))
        plan = sagemaker.describe_training_plan(TrainingPlanName=PLAN_NAME)
        early = {
            **body,  # a window long enough, but it closes an hour before the plan ends
            "earliest_start": (plan["StartTime"] - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "latest_end": (plan["EndTime"] - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        assert "after latest_end" in _refusal(post_reservation(cloud, early), "latest_end")
        more = {**body, "instance_count": 4}
        assert "fewer than instance_count 4" in _refusal(post_reservation(cloud, more), "instance_count")
        assert post_reservation(cloud, body)["statusCode"] == 202  # the same plan, now paid and fitting


def test_a_plan_in_use_by_another_request_or_bought_for_one_is_refused() -> None:
    with make_cloud() as cloud:
        arn = _buy_elsewhere(cloud)
        assert post_reservation(cloud, _brought_request(cloud, arn))["statusCode"] == 202
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "brought-plan"))
        second = {**_brought_request(cloud, arn), "request_id": "brought-again"}
        says = _refusal(post_reservation(cloud, second), "training_plan_arn")
        assert "already in use by request brought-plan" in says
        # A plan the orchestrator bought for a request is that request's, even to a team mate.
        assert post_reservation(cloud, base_request())["statusCode"] == 202
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "eval-week-49"))
        bought = next(i for i in ledger_items(cloud, "eval-week-49") if i["sk"] == "PURCHASE")
        theirs = {**second, "training_plan_arn": bought["training_plan_arn"]}
        theirs["earliest_start"], theirs["latest_end"] = bought["start_time"], bought["end_time"]
        says = _refusal(post_reservation(cloud, theirs), "training_plan_arn")
        assert "bought by this orchestrator for request eval-week-49" in says
        cloud.run_until_idle()
        assert states(cloud, "brought-again") == []
        assert _creates(cloud) == 2  # central procurement's and eval-week-49's


def test_a_brought_capacity_block_runs_the_instances_and_its_expiry_warning_releases_them() -> None:

    with make_cloud(market=ONLY_US_EAST_1) as cloud:
        create_launch_templates(cloud)
        ec2 = cloud.client("ec2", REGION)
        offer = ec2.describe_capacity_block_offerings(
            InstanceType="p5.48xlarge",
            InstanceCount=2,
            StartDateRange=START + timedelta(days=7),
            EndDateRange=START + timedelta(days=14),
            CapacityDurationHours=72,
        )["CapacityBlockOfferings"][0]
        block_id = ec2.purchase_capacity_block(
            CapacityBlockOfferingId=offer["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX"
        )["CapacityReservation"]["CapacityReservationId"]
        cloud.run(until=cloud.now() + timedelta(hours=1))
        block = ec2.describe_capacity_reservations(CapacityReservationIds=[block_id])["CapacityReservations"][
            0
        ]
        assert block["State"] == "scheduled"
        body = {
            **ec2_request(),
            "request_id": "brought-block",
            "capacity_reservation_id": block_id,
            "earliest_start": block["StartDate"].strftime("%Y-%m-%dT%H:%M:%SZ"),
            "latest_end": block["EndDate"].strftime("%Y-%m-%dT%H:%M:%SZ"),
            "release_margin_minutes": 5,  # the expiry warning (40 min before the end) comes first
        }
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run_until_idle()

        seen = states(cloud, "brought-block")
        assert in_order(seen, ["REQUESTED", "PURCHASED", "ACTIVE", "READY", "RELEASING", "RELEASED"]), seen
        purchases = [c for c in cloud.dispatcher.calls if c.operation == "PurchaseCapacityBlock"]
        assert len(purchases) == 1  # central procurement's: the product bought nothing
        items = ledger_items(cloud, "brought-block")
        releasing = next(i for i in items if i.get("state") == "RELEASING")
        assert releasing["detail"]["reason"] == "capacity-block-expiring"
        launched = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
        assert len(launched) == 2
        assert {i["CapacityReservationId"] for i in launched} == {block_id}
        assert {i["State"]["Name"] for i in launched} == {"terminated"}
        purchase = next(i for i in items if i["sk"] == "PURCHASE")
        assert (purchase["capacity_reservation_id"], purchase["upfront_fee_usd"], purchase["brought"]) == (
            block_id,
            "0",
            True,
        )
        assert cloud.billable_resources() == []
