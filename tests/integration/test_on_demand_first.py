"""On-demand first (issue 6's acceptance): capacity on demand in region 1 -> no reservation; none in regions 1
and 2 -> region 3; none anywhere -> a capacity block, with every try in the ledger."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from localcloud.emulator.market import MarketConfig
from tests.integration.support import ledger_items, make_cloud, post_reservation, slack_texts, states
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
    found = [i for i in ledger_items(cloud, REQUEST_ID) if i["sk"].startswith("ON_DEMAND_TRY#")]
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
