"""On-demand first (issue 6's acceptance): capacity on demand in region 1 -> no reservation; none in regions 1
and 2 -> region 3; none anywhere -> a capacity block, with every try in the ledger."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from capacity.record_kinds import ON_DEMAND_TRY_PREFIX

from localcloud.emulator.market import MarketConfig
from tests.integration.support import (
    base_request,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
    training_plans,
)
from tests.integration.test_ec2_capacity_blocks import (
    EC2_REGIONS,
    blocks,
    create_launch_templates,
    ec2_request,
    instances,
)

pytestmark = pytest.mark.integration

REQUEST_ID = "train-now-ec2"


def now_request(**overrides: Any) -> dict[str, Any]:
    """2 x p5.48xlarge for 72 h in a window from now (the clouds start at 2026-11-29 12:00 UTC) to 4 days
    later (a 72 h capacity block still fits: blocks start at the next 11:30 UTC)."""
    return {
        **ec2_request(),
        "request_id": REQUEST_ID,
        "earliest_start": "2026-11-29T12:00:00Z",
        "latest_end": "2026-12-03T12:00:00Z",
        "release_margin_minutes": 60,
        **overrides,
    }


def tries(cloud: Any) -> list[dict[str, Any]]:
    """The ledger's on-demand tries, in the order they were made."""
    found = [i for i in ledger_items(cloud, REQUEST_ID) if i["sk"].startswith(ON_DEMAND_TRY_PREFIX)]
    return sorted(found, key=lambda item: int(item["order"]))


def test_capacity_on_demand_in_the_first_region_buys_no_reservation() -> None:
    with make_cloud() as cloud:
        create_launch_templates(cloud)
        response = post_reservation(cloud, now_request())
        assert response["statusCode"] == 202, response
        cloud.run_until_idle()
        assert blocks(cloud) == []
        assert [(t["region"], t["market"], t["outcome"]) for t in tries(cloud)] == [
            ("us-east-1", "on-demand", "launched")
        ]
        launched = instances(cloud)
        assert len(launched) == 2
        assert {i["Placement"]["AvailabilityZone"][:-1] for i in launched} == {"us-east-1"}
        assert "InstanceLifecycle" not in launched[0]  # on demand: neither spot nor capacity block
        seen = states(cloud, REQUEST_ID)
        assert seen == ["REQUESTED", "PLANNED", "DEPLOYING", "READY", "RELEASING", "RELEASED"]
        released = next(i for i in ledger_items(cloud, REQUEST_ID) if i.get("state") == "RELEASED")
        summary = released["detail"]["summary"]
        assert Decimal(summary["upfront_fee_usd"]) == 0
        # Released at latest_end - 60 min: about 95 h served at the on-demand price of 2 x $55.04/h.
        served = Decimal(summary["hours_served"])
        assert Decimal("94.9") < served < Decimal("95.0")
        paid = Decimal(summary["on_demand_equivalent_served_usd"])
        assert abs(paid - Decimal("110.08") * served) < 1  # hours are rounded to 0.01 in the summary
        assert cloud.billable_resources() == []
        assert "ON_DEMAND" in slack_texts(cloud)


def test_no_capacity_on_demand_in_regions_1_and_2_launches_in_region_3() -> None:
    market = MarketConfig(on_demand_capacity={"us-east-1/p5.48xlarge": 0, "us-west-2/p5.48xlarge": 0})
    with make_cloud(market=market) as cloud:
        create_launch_templates(cloud)
        post_reservation(cloud, now_request())
        cloud.run_until_idle()
        assert blocks(cloud) == []
        assert [(t["region"], t["outcome"]) for t in tries(cloud)] == [
            ("us-east-1", "insufficient-capacity"),
            ("us-west-2", "insufficient-capacity"),
            ("eu-west-1", "launched"),
        ]
        assert {i["Placement"]["AvailabilityZone"][:-1] for i in instances(cloud)} == {"eu-west-1"}
        assert "READY" in states(cloud, REQUEST_ID)
        assert cloud.billable_resources() == []


def test_no_capacity_on_demand_anywhere_reserves_a_capacity_block_and_records_every_try() -> None:
    market = MarketConfig(on_demand_capacity={"*/p5.48xlarge": 0})
    with make_cloud(market=market) as cloud:
        create_launch_templates(cloud)
        post_reservation(cloud, now_request())
        cloud.run_until_idle()
        assert [(t["region"], t["market"], t["outcome"]) for t in tries(cloud)] == [
            (region, "on-demand", "insufficient-capacity") for region in EC2_REGIONS
        ]
        assert len(blocks(cloud)) == 1
        seen = states(cloud, REQUEST_ID)
        assert "PURCHASED" in seen
        assert seen[-1] == "RELEASED"
        assert {i.get("InstanceLifecycle") for i in instances(cloud)} == {"capacity-block"}
        assert cloud.billable_resources() == []


def test_spot_ok_tries_spot_after_on_demand_before_reserving() -> None:
    market = MarketConfig(on_demand_capacity={"*/p5.48xlarge": 0})
    with make_cloud(market=market) as cloud:
        create_launch_templates(cloud)
        post_reservation(cloud, now_request(strategy="spot-ok"))
        cloud.run_until_idle()
        # The emulator's on-demand knob covers spot too: six tries, then a block.
        assert [t["market"] for t in tries(cloud)] == ["on-demand"] * 3 + ["spot"] * 3
        assert len(blocks(cloud)) == 1


# ------------------------------------------------------------------------------- SageMaker endpoints

SM_REGIONS = ("us-east-1", "us-west-2", "us-east-2")


def sagemaker_now_request() -> dict[str, Any]:
    """The demo's SageMaker request (2 x ml.p5.48xlarge, two models) from now for 72 h in a 4-day window."""
    body = {
        **base_request(),
        "earliest_start": "2026-11-29T12:00:00Z",
        "latest_end": "2026-12-03T12:00:00Z",
    }
    body.pop("approval_above_usd")  # on demand for the window costs more than the demo's threshold
    return body


def endpoint_configs(cloud: Any) -> list[dict[str, Any]]:
    """The endpoint configs created (any region), as DescribeEndpointConfig answers, from the call log."""
    return [c.params for c in cloud.dispatcher.calls if c.operation == "CreateEndpointConfig"]


def sm_tries(cloud: Any) -> list[tuple[str, str]]:
    found = [i for i in ledger_items(cloud, "eval-week-49") if i["sk"].startswith(ON_DEMAND_TRY_PREFIX)]
    return [(t["region"], t["outcome"]) for t in sorted(found, key=lambda item: int(item["order"]))]


def test_sagemaker_capacity_on_demand_in_region_1_creates_the_endpoint_without_a_plan() -> None:
    with make_cloud() as cloud:
        post_reservation(cloud, sagemaker_now_request())
        cloud.run_until_idle()
        assert training_plans(cloud) == []
        assert sm_tries(cloud) == [("us-east-1", "in-service")]
        (config,) = endpoint_configs(cloud)
        assert "CapacityReservationConfig" not in config["ProductionVariants"][0]
        seen = states(cloud, "eval-week-49")
        assert seen == ["REQUESTED", "PLANNED", "DEPLOYING", "READY", "RELEASING", "RELEASED"]
        released = next(i for i in ledger_items(cloud, "eval-week-49") if i.get("state") == "RELEASED")
        assert Decimal(released["detail"]["summary"]["upfront_fee_usd"]) == 0
        assert cloud.billable_resources() == []


def test_sagemaker_no_capacity_on_demand_in_regions_1_and_2_serves_from_region_3() -> None:
    market = MarketConfig(on_demand_capacity={"us-east-1/ml.p5.48xlarge": 0, "us-west-2/ml.p5.48xlarge": 0})
    with make_cloud(market=market) as cloud:
        post_reservation(cloud, sagemaker_now_request())
        cloud.run_until_idle()
        assert training_plans(cloud) == []
        assert sm_tries(cloud) == [
            ("us-east-1", "insufficient-capacity"),
            ("us-west-2", "insufficient-capacity"),
            ("us-east-2", "in-service"),
        ]
        assert {c.region for c in cloud.dispatcher.calls if c.operation == "CreateEndpoint"} == set(
            SM_REGIONS
        )
        assert "READY" in states(cloud, "eval-week-49")
        assert cloud.billable_resources() == []


def test_sagemaker_no_capacity_on_demand_anywhere_buys_a_training_plan() -> None:
    market = MarketConfig(on_demand_capacity={"*/ml.p5.48xlarge": 0})
    with make_cloud(market=market) as cloud:
        post_reservation(cloud, sagemaker_now_request())
        cloud.run_until_idle()
        assert sm_tries(cloud) == [(region, "insufficient-capacity") for region in SM_REGIONS]
        assert len(training_plans(cloud)) == 1
        seen = states(cloud, "eval-week-49")
        assert "PURCHASED" in seen
        assert "READY" in seen
        # The endpoint that serves runs on the plan (the on-demand configs were deleted first).
        last_config = endpoint_configs(cloud)[-1]
        assert "CapacityReservationConfig" in last_config["ProductionVariants"][0]
        assert cloud.billable_resources() == []


def g6_now_request() -> dict[str, Any]:
    """1 x ml.g6.12xlarge (no training plan exists for it) from now for 24 h, two one-GPU models."""
    body = {
        **sagemaker_now_request(),
        "instance_type": "ml.g6.12xlarge",
        "instance_count": 1,
        "duration_hours": 24,
        "latest_end": "2026-11-30T12:00:00Z",
    }
    body["models"] = [{**m, "accelerators": 1, "cpu_cores": 4, "memory_mb": 16384} for m in body["models"]]
    return body


def test_g6_without_capacity_on_demand_anywhere_fails_with_no_reservation_fallback() -> None:
    market = MarketConfig(on_demand_capacity={"*/ml.g6.12xlarge": 0})
    with make_cloud(market=market) as cloud:
        response = post_reservation(cloud, g6_now_request())
        assert response["statusCode"] == 202, response
        cloud.run_until_idle()
        assert sm_tries(cloud) == [(region, "insufficient-capacity") for region in SM_REGIONS]
        # no SearchTrainingPlanOfferings (AWS would refuse the type), nothing bought, nothing left running
        searched = [c for c in cloud.dispatcher.calls if c.operation == "SearchTrainingPlanOfferings"]
        assert searched == []
        assert training_plans(cloud) == []
        assert states(cloud, "eval-week-49") == ["REQUESTED", "FAILED"]
        failed = next(i for i in ledger_items(cloud, "eval-week-49") if i.get("state") == "FAILED")
        assert failed["detail"]["reason"].startswith(
            "No training plan exists for ml.g6.12xlarge (training plans reserve ml.p4d.24xlarge, "
        )
        assert "so there is no reservation fallback" in failed["detail"]["reason"]
        assert cloud.billable_resources() == []


def test_what_the_team_refuses_is_never_launched_on_demand() -> None:
    """ml-eval may reserve ml.p5.48xlarge in us-east-1 only (deploy/policy-seed.json): its on-demand-first
    EC2 request for p5.48xlarge launches nothing and ends REJECTED with the team's reason."""
    from tests.integration.support import api_event
    from tests.integration.test_teams import EVAL_MEMBER

    with make_cloud() as cloud:
        create_launch_templates(cloud)
        answer = cloud.api_request(api_event(now_request(), caller=EVAL_MEMBER))
        assert answer["statusCode"] == 202, answer
        cloud.run_until_idle()
        assert instances(cloud) == []
        assert tries(cloud) == []
        assert blocks(cloud) == []
        rejected = next(i for i in ledger_items(cloud, REQUEST_ID) if i.get("state") == "REJECTED")
        assert rejected["detail"]["error"] == "TeamLimitExceeded"
        assert "team ml-eval may not reserve p5.48xlarge" in rejected["detail"]["reason"]


def test_on_demand_above_the_teams_approval_threshold_is_never_launched_without_an_approval() -> None:
    """The request names no threshold; its team asks for an approval above $1,000. On demand for the window
    (about $10,600) is above it: the dry run says so, nothing is launched on demand, and the capacity block
    waits for an approver (none comes: nothing is bought)."""
    from tests.integration.support import api_event
    from tests.integration.test_extension_approval import lower_team_threshold

    with make_cloud() as cloud:
        create_launch_templates(cloud)
        lower_team_threshold(cloud, Decimal(1000))
        dry = cloud.api_request(api_event(now_request(), path="/plans"))
        assert dry["statusCode"] == 200, dry
        check = json.loads(dry["body"])["advice"]["on_demand_check"]
        assert check.startswith("not tried: "), check
        assert "$1,000.00" in check, check
        assert post_reservation(cloud, now_request())["statusCode"] == 202
        cloud.run_until_idle()
        assert tries(cloud) == []
        assert instances(cloud) == []
        assert blocks(cloud) == []
        seen = states(cloud, REQUEST_ID)
        assert "AWAITING_APPROVAL" in seen, seen
        assert seen[-1] == "REJECTED", seen
        assert cloud.billable_resources() == []
