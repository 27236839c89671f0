"""Events from every region reach the app (issue 12, "the product, fixed"): AWS puts alarm state changes
and capacity block warnings on the default bus of the resource's region, so a reservation bought outside
the stack's region (us-east-1) scales and releases only through the forwarding rule the app puts there.

Without the forwarding rule both tests fail: the us-east-2 alarms never reach ``scale_components`` (no
scale to zero, no scale back, no idle release) and the us-west-2 block is released by its schedule, not
by its own expiry warning.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from capacity.record_kinds import SCALE_PREFIX

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from tests.integration.support import base_request, ledger_items, make_cloud, post_reservation, states
from tests.integration.test_ec2_capacity_blocks import REQUEST_ID as EC2_ID
from tests.integration.test_ec2_capacity_blocks import blocks, create_launch_templates, ec2_request, instances

pytestmark = pytest.mark.integration

RID = "eval-week-49"
ENDPOINT = "co-eval-week-49"
EU = "co-eval-week-49-llama-3-8b-eu"
US = "co-eval-week-49-llama-3-8b-us"
RULE = "capacity-orchestrator-forward-aws-events"
ONLY_US_EAST_2 = MarketConfig(capacity={"us-east-1/ml.p5.48xlarge": 0, "us-west-2/ml.p5.48xlarge": 0})
ONLY_US_WEST_2 = MarketConfig(
    capacity={"us-east-1/p5.48xlarge": 0, "eu-west-1/p5.48xlarge": 0}, offerings_page_size=5
)


def _minutes(cloud: LocalCloud, n: int) -> None:
    cloud.run(until=cloud.now() + timedelta(minutes=n))


def _desired(cloud: LocalCloud, component: str) -> int:
    sagemaker = cloud.client("sagemaker", "us-east-2")
    return int(
        sagemaker.describe_inference_component(InferenceComponentName=component)["RuntimeConfig"][
            "DesiredCopyCount"
        ]
    )


def _invoke(cloud: LocalCloud, component: str, count: int) -> int:
    """``count`` requests in us-east-2 now; how many were served."""
    runtime = cloud.client("sagemaker-runtime", "us-east-2")
    served = 0
    for _ in range(count):
        try:
            runtime.invoke_endpoint(
                EndpointName=ENDPOINT,
                InferenceComponentName=component,
                Body=b"{}",
                ContentType="application/json",
            )
            served += 1
        except runtime.exceptions.ClientError as exc:
            if "no capacity" not in str(exc):
                raise
    return served


def _rules(cloud: LocalCloud, region: str) -> list[dict[str, Any]]:
    events = cloud.client("events", region)
    return [
        {**rule, "Targets": events.list_targets_by_rule(Rule=rule["Name"])["Targets"]}
        for rule in events.list_rules(NamePrefix=RULE)["Rules"]
    ]


def test_a_reservation_in_us_east_2_scales_to_zero_and_back_and_is_idle_released() -> None:
    body = base_request()
    for model in body["models"]:
        model["scaling"] = {"target_invocations_per_copy": 5, "idle_minutes_before_zero": 5}
    body["idle_policy"] = {"action": "release", "idle_hours": 1}
    with make_cloud(market=ONLY_US_EAST_2) as cloud:
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        purchase = next(i for i in ledger_items(cloud, RID) if i["sk"] == "PURCHASE")
        assert purchase["region"] == "us-east-2"
        (rule,) = _rules(cloud, "us-east-2")
        ((target,),) = [rule["Targets"]]
        assert target["Arn"] == cloud.stack.arn("EventBus")
        assert target["RoleArn"] == cloud.stack.arn("ForwarderRole")

        _minutes(cloud, 15)
        assert (_desired(cloud, EU), _desired(cloud, US)) == (0, 0)  # idle: scaled to zero from us-east-2

        assert _invoke(cloud, EU, 3) == 0  # no copy: the no-capacity alarm fires in us-east-2
        served = 0
        for _ in range(10):
            _minutes(cloud, 1)
            served = _invoke(cloud, EU, 3)
            if served:
                break
        assert served == 3
        assert _desired(cloud, EU) == 1  # scaled back from zero

        cloud.run(stop_when=lambda: "RELEASED" in states(cloud, RID))
        actions = [i["action"] for i in ledger_items(cloud, RID) if i["sk"].startswith(SCALE_PREFIX)]
        assert actions[:3] == ["scale_in_to_zero", "scale_in_to_zero", "scale_out_from_zero"]
        assert "release_requested_idle" in actions
        releasing = next(i for i in ledger_items(cloud, RID) if i.get("state") == "RELEASING")
        assert releasing["detail"]["reason"] == "idle"
        forwarded = [
            e
            for e in cloud.timeline.entries("event")
            if e.detail.get("region") == "us-east-1"
            and e.detail.get("event", {}).get("region") == "us-east-2"
        ]
        assert forwarded  # the us-east-2 alarm events, on the app's bus in us-east-1
        cloud.run_until_idle()
        assert cloud.billable_resources() == []
        assert _rules(cloud, "us-east-2") == []  # no reservation needs us-east-2's events any more


def test_a_capacity_block_in_us_west_2_is_released_on_its_own_expiry_warning() -> None:
    with make_cloud(market=ONLY_US_WEST_2) as cloud:
        create_launch_templates(cloud)
        response = post_reservation(cloud, ec2_request())
        assert response["statusCode"] == 202, response
        cloud.run_until_idle()

        (block,) = blocks(cloud)
        assert block["AvailabilityZone"].startswith("us-west-2")
        items = ledger_items(cloud, EC2_ID)
        releasing = next(i for i in items if i.get("state") == "RELEASING")
        assert (
            releasing["detail"]["reason"] == "capacity-block-expiring"
        )  # not the schedule's reservation-end
        launched = instances(cloud)
        assert len(launched) == 2
        assert {i["State"]["Name"] for i in launched} == {"terminated"}
        assert states(cloud, EC2_ID)[-1] == "RELEASED"
        assert _rules(cloud, "us-west-2") == []  # released: the block's events are not needed any more
