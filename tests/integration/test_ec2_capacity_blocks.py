"""EC2 Capacity Blocks for ML, whole lifecycles on the local cloud (issue 6's acceptance): search in three
regions with pagination, one purchase, ``scheduled -> active``, instances launched into the block,
expiry warning -> instances terminated, nothing left; validation before any AWS call; exactly-once
purchase; a failed payment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from capacity.record_kinds import PURCHASE

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import (
    LIFECYCLE,
    ROOT,
    api_event,
    in_order,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
)

pytestmark = pytest.mark.integration

EC2_EVENT = ROOT / "events/api_post_reservation_ec2.json"
LAUNCH_TEMPLATE = ROOT / "events/ec2_create_launch_template.json"
REQUEST_ID = "train-week-49-ec2"
EC2_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")


def ec2_request() -> dict[str, Any]:
    """The EC2 sample request (2 x p5.48xlarge, 72 h, launch template gpu-workers)."""
    body: dict[str, Any] = json.loads(json.loads(EC2_EVENT.read_text())["body"])
    return body


def create_launch_templates(cloud: LocalCloud) -> None:
    """The sample launch template, in every candidate region (as ``localcloud run`` does with the file)."""
    spec = json.loads(Path(LAUNCH_TEMPLATE).read_text())
    for region in spec.pop("Regions"):
        cloud.client("ec2", region).create_launch_template(**spec)


def blocks(cloud: LocalCloud) -> list[dict[str, Any]]:
    """Every capacity reservation bought, in every candidate region."""
    found: list[dict[str, Any]] = []
    for region in EC2_REGIONS:
        found.extend(cloud.client("ec2", region).describe_capacity_reservations()["CapacityReservations"])
    return found


def instances(cloud: LocalCloud) -> list[dict[str, Any]]:
    """Every instance launched, in every candidate region."""
    found: list[dict[str, Any]] = []
    for region in EC2_REGIONS:
        for reservation in cloud.client("ec2", region).describe_instances()["Reservations"]:
            found.extend(reservation["Instances"])
    return found


def aws_calls(cloud: LocalCloud, operation: str) -> list[Any]:
    """The recorded AWS calls of ``operation`` (any service)."""
    return [record for record in cloud.dispatcher.calls if record.operation == operation]


# The other regions are searched but have no p5 capacity, so the block is bought in the stack's region
# (test_cross_region.py buys one elsewhere: its warning arrives through the forwarding rule).
ONLY_US_EAST_1 = MarketConfig(
    capacity={"us-west-2/p5.48xlarge": 0, "eu-west-1/p5.48xlarge": 0}, offerings_page_size=5
)


def test_ec2_happy_path_buys_one_block_launches_into_it_and_terminates_on_the_expiry_warning() -> None:
    with make_cloud(market=ONLY_US_EAST_1) as cloud:
        create_launch_templates(cloud)
        response = post_reservation(cloud, ec2_request())
        assert response["statusCode"] == 202, response
        cloud.run_until_idle()

        seen = states(cloud, REQUEST_ID)
        assert in_order(seen, LIFECYCLE), seen
        # Every region searched, every page followed (the emulator pages at MaxResults).
        searched = {r.region for r in aws_calls(cloud, "DescribeCapacityBlockOfferings")}
        assert searched == set(EC2_REGIONS)
        assert any(r.params.get("NextToken") for r in aws_calls(cloud, "DescribeCapacityBlockOfferings"))
        bought = blocks(cloud)
        assert len(bought) == 1
        block = bought[0]
        assert {"Key": "capacity-orchestrator:request-id", "Value": REQUEST_ID} in block["Tags"]
        assert len(aws_calls(cloud, "PurchaseCapacityBlock")) == 1
        # Instances were launched into the block, from the launch template, and are terminated now.
        launched = instances(cloud)
        assert len(launched) == 2
        assert {i["CapacityReservationId"] for i in launched} == {block["CapacityReservationId"]}
        assert {i["InstanceLifecycle"] for i in launched} == {"capacity-block"}
        assert {i["ImageId"] for i in launched} == {"ami-0abcdef1234567890"}
        assert {i["State"]["Name"] for i in launched} == {"terminated"}
        items = ledger_items(cloud, REQUEST_ID)
        ready = next(i for i in items if i.get("state") == "READY")
        assert sorted(ready["detail"]["instance_ids"]) == sorted(i["InstanceId"] for i in launched)
        assert ready["detail"]["capacity_reservation_id"] == block["CapacityReservationId"]
        assert ready["detail"]["availability_zone"] == block["AvailabilityZone"]
        releasing = next(i for i in items if i.get("state") == "RELEASING")
        assert releasing["detail"]["reason"] == "capacity-block-expiring"
        released = next(i for i in items if i.get("state") == "RELEASED")
        summary = released["detail"]["summary"]
        assert summary["instance_type"] == "p5.48xlarge"
        assert float(summary["hours_served"]) > 60
        # The block is named in EC2's words everywhere, never as a training plan (issue 28).
        assert summary["capacity_reservation_id"] == block["CapacityReservationId"]
        assert not isinstance(summary["training_plan_name"], str)  # null
        purchase = next(i for i in items if i["sk"] == PURCHASE)
        shown = cloud.api_request(api_event(None, method="GET", path=f"/reservations/{REQUEST_ID}"))
        answer = json.loads(shown["body"])["purchase"]
        for named in (purchase, answer):
            assert (named["kind"], named["platform"]) == ("capacity-block", "ec2")
            assert named["capacity_reservation_id"] == block["CapacityReservationId"]
            assert named["capacity_reservation_arn"] == block["CapacityReservationArn"]
            assert named["availability_zone"] == block["AvailabilityZone"]
            assert not {"training_plan_arn", "training_plan_name"} & set(named)
        assert cloud.billable_resources() == []
        statuses = {e.state_machine.rsplit("-", 1)[-1]: e.status for e in cloud.executions()}
        assert statuses["ReserveCapacityStateMachine"] == "SUCCEEDED"
        assert "is READY" in slack_texts(cloud)


@pytest.mark.parametrize(
    ("change", "field", "phrase", "status"),
    [
        ({"duration_hours": 480}, "duration_hours", "480 h (20 days)", 400),
        ({"duration_hours": 360}, "duration_hours", "360 h (15 days)", 400),
        ({"instance_count": 0}, "instance_count", "count 0 is not allowed", 400),
        ({"instance_count": 65}, "instance_count", "count 65 is not allowed", 400),
        # Well-formed but too far ahead of now: the logic refuses it (422), like a start in the past.
        (
            {"earliest_start": "2027-01-30T00:00:00Z", "latest_end": "2027-02-06T00:00:00Z"},
            "earliest_start",
            "more than 8 weeks",
            422,
        ),
    ],
)
def test_invalid_ec2_requests_are_rejected_before_any_aws_call(
    change: dict[str, Any], field: str, phrase: str, status: int
) -> None:
    with make_cloud() as cloud:
        response = post_reservation(cloud, {**ec2_request(), **change})
        assert response["statusCode"] == status, response
        errors = response["json"]["errors"]
        assert [e["field"] for e in errors] == [field]
        assert phrase in errors[0]["message"]
        cloud.run_until_idle()
        assert [c for c in cloud.dispatcher.calls if c.service in ("ec2", "sagemaker")] == []
        assert cloud.executions() == []


def test_the_same_ec2_request_five_times_and_a_crash_after_commit_buy_one_block() -> None:
    faults = FaultInjector(
        [
            FaultRule(
                service="ec2", operation="PurchaseCapacityBlock", kind=FaultKind.CRASH_AFTER_COMMIT, times=1
            )
        ]
    )
    with make_cloud(faults=faults, market=ONLY_US_EAST_1) as cloud:
        create_launch_templates(cloud)
        responses = [post_reservation(cloud, ec2_request()) for _ in range(3)]
        assert {r["statusCode"] for r in responses} == {202}
        entry = {
            "Source": "capacity.orchestrator",
            "DetailType": "ReservationRequested",
            "Detail": json.dumps({"schema_version": 1, "request": ec2_request()}),
            "EventBusName": cloud.stack.physical_id("EventBus"),
        }
        cloud.put_events([entry, entry])
        cloud.run_until_idle()
        assert [f.kind for f in faults.fired] == [FaultKind.CRASH_AFTER_COMMIT]
        assert len(blocks(cloud)) == 1
        # The timeout reached the step (no blind retry of the purchase); the block was adopted by its tag.
        assert len(aws_calls(cloud, "PurchaseCapacityBlock")) == 1
        assert states(cloud, REQUEST_ID).count("PURCHASED") == 1
        assert states(cloud, REQUEST_ID).count("RELEASED") == 1
        assert len(instances(cloud)) == 2
        assert cloud.billable_resources() == []


def test_a_failed_payment_ends_failed_notified_and_launches_nothing() -> None:
    faults = FaultInjector(
        [FaultRule(service="ec2", operation="PurchaseCapacityBlock", kind=FaultKind.PAYMENT_FAILED)]
    )
    with make_cloud(faults=faults, market=ONLY_US_EAST_1) as cloud:
        create_launch_templates(cloud)
        post_reservation(cloud, ec2_request())
        cloud.run_until_idle()
        assert blocks(cloud)[0]["State"] == "payment-failed"
        seen = states(cloud, REQUEST_ID)
        assert "FAILED" in seen
        assert not {"SCHEDULED", "ACTIVE", "DEPLOYING", "READY"} & set(seen)
        failed = next(i for i in ledger_items(cloud, REQUEST_ID) if i.get("state") == "FAILED")
        assert "payment-failed" in json.dumps(failed["detail"])
        assert instances(cloud) == []
        assert aws_calls(cloud, "RunInstances") == []
        assert "payment-failed" in slack_texts(cloud)
        assert cloud.billable_resources() == []
        statuses = {e.state_machine.rsplit("-", 1)[-1]: e.status for e in cloud.executions()}
        assert statuses["ReserveCapacityStateMachine"] == "FAILED"
