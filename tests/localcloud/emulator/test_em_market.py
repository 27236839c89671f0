"""The capacity market: determinism, price anchors, finite capacity, and configuration."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from localcloud.contracts import AwsError
from localcloud.emulator import Emulator, MarketConfig
from localcloud.emulator.common import RecordingSink
from localcloud.emulator.instances import INSTANCE_SPECS
from localcloud.emulator.shapes import enum_values
from tests.localcloud.emulator.support import START, raises_aws


def search(emulator: Emulator, **overrides: Any) -> list[dict[str, Any]]:
    params: dict[str, Any] = {
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": 2,
        "DurationHours": 72,
        "TargetResources": ["endpoint"],
        "StartTimeAfter": START + timedelta(days=6),
        "EndTimeBefore": START + timedelta(days=20),
    }
    region = overrides.pop("region", "us-east-1")
    params.update(overrides)
    found: list[dict[str, Any]] = emulator.call(
        "sagemaker", "SearchTrainingPlanOfferings", params, region=region
    )["TrainingPlanOfferings"]
    return found


def test_same_seed_same_offerings_other_seed_other_offerings(
    aws: None, clock: time_machine.Traveller
) -> None:
    first, second = Emulator(events=RecordingSink()), Emulator(events=RecordingSink())
    other = Emulator(seed=8, events=RecordingSink())
    for region in ("us-east-1", "us-west-2", "eu-west-1"):
        assert search(first, region=region) == search(second, region=region)
    assert [item["UpfrontFee"] for item in search(first)] != [item["UpfrontFee"] for item in search(other)]


def test_the_demo_request_finds_offerings(emulator: Emulator) -> None:
    # 2 x ml.p5.48xlarge for 3 days starting about a week from now, us-east-1 or us-west-2.
    assert search(emulator, region="us-east-1")
    assert search(emulator, region="us-west-2")


def test_on_demand_prices_are_anchored_and_spread_by_region(emulator: Emulator) -> None:
    market = emulator.market
    assert market.on_demand_usd_per_hour("us-east-1", "p5.48xlarge") == Decimal("55.0400")
    assert market.on_demand_usd_per_hour("us-east-1", "ml.p5.48xlarge") == Decimal("55.0400")
    prices = [market.on_demand_usd_per_hour(region, "ml.p5.48xlarge") for region in market.regions()]
    assert min(prices) == Decimal("55.0400")
    assert max(prices) / min(prices) < Decimal("1.08")
    assert market.on_demand_usd_per_hour("eu-central-1", "ml.g6.12xlarge") > market.on_demand_usd_per_hour(
        "us-east-1", "ml.g6.12xlarge"
    )
    with pytest.raises(ValueError, match="not known"):
        market.on_demand_usd_per_hour("us-east-1", "ml.nope.large")
    with pytest.raises(ValueError, match="not in the emulated market"):
        market.on_demand_usd_per_hour("sa-east-1", "ml.p5.48xlarge")


def test_capacity_blocks_cost_less_than_on_demand_and_more_than_plans(emulator: Emulator) -> None:
    market = emulator.market
    start = START + timedelta(days=7)
    for instance_type in ("p5.48xlarge", "p4d.24xlarge", "trn1.32xlarge"):
        on_demand = market.on_demand_usd_per_hour("us-west-2", instance_type)
        block = market.capacity_block_usd_per_hour("us-west-2", instance_type, start)
        plan = market.training_plan_usd_per_hour("us-west-2", f"ml.{instance_type}", start)
        assert Decimal("0.35") <= 1 - block / on_demand <= Decimal("0.40")
        assert Decimal("0.70") <= 1 - plan / on_demand <= Decimal("0.75")


def test_training_plan_types_are_the_botocore_enum(emulator: Emulator) -> None:
    enum = set(enum_values("sagemaker", "ReservedCapacityInstanceType"))
    offered = {f"ml.{spec.name}" for spec in INSTANCE_SPECS.values() if spec.training_plan}
    assert offered <= enum
    assert "ml.g6.12xlarge" not in enum


def test_zero_capacity_everywhere(aws: None, clock: time_machine.Traveller) -> None:
    emulator = Emulator(events=RecordingSink(), market=MarketConfig(capacity={"*": 0}))
    for region in emulator.market.regions():
        assert search(emulator, region=region) == []
    assert (
        emulator.call(
            "ec2",
            "DescribeCapacityBlockOfferings",
            {
                "InstanceType": "p5.48xlarge",
                "InstanceCount": 1,
                "CapacityDurationHours": 24,
            },
            region="us-east-1",
        )["CapacityBlockOfferings"]
        == []
    )


def test_purchases_consume_capacity(aws: None, clock: time_machine.Traveller) -> None:
    emulator = Emulator(events=RecordingSink(), market=MarketConfig(capacity={"us-east-1/ml.p5.48xlarge": 2}))
    window = {"StartTimeAfter": START, "EndTimeBefore": START + timedelta(days=2), "DurationHours": 24}
    for name in ("a", "b", "c"):  # three zones of 2 instances each on the first day
        offering = search(emulator, **window)[0]
        emulator.call(
            "sagemaker",
            "CreateTrainingPlan",
            {
                "TrainingPlanName": name,
                "TrainingPlanOfferingId": offering["TrainingPlanOfferingId"],
            },
            region="us-east-1",
        )
    assert search(emulator, **window) == []
    assert search(emulator, **window, InstanceCount=1, region="us-west-2") != []


def test_alternatives_exist_when_the_first_choice_has_none(emulator: Emulator) -> None:
    # p5 has no plan capacity in ap-northeast-1, but other counts, durations and regions do.
    assert search(emulator, region="ap-northeast-1") == []
    assert search(emulator, region="ap-northeast-1", InstanceType="ml.p4d.24xlarge") != []
    assert search(emulator, region="us-west-2", InstanceCount=1, DurationHours=48) != []


def test_ids_do_not_depend_on_the_order_of_concurrent_searches(
    aws: None, clock: time_machine.Traveller
) -> None:
    forward, backward = Emulator(events=RecordingSink()), Emulator(events=RecordingSink())
    regions = ["us-east-1", "us-west-2", "eu-west-1"]
    found_forward = {region: search(forward, region=region) for region in regions}
    found_backward = {region: search(backward, region=region) for region in reversed(regions)}
    assert found_forward == found_backward
    assert (
        search(forward)[0]["TrainingPlanOfferingId"]
        != found_forward["us-east-1"][0]["TrainingPlanOfferingId"]
    )


# ---------------------------------------------------------------- listings that move with virtual time


def test_capacity_listed_from_a_later_instant_is_offered_only_from_then(
    aws: None, clock: time_machine.Traveller
) -> None:
    appears = START + timedelta(days=3)
    emulator = Emulator(
        events=RecordingSink(), market=MarketConfig(listed_from={"*/ml.p5.48xlarge": appears})
    )
    assert search(emulator) == []
    assert search(emulator, InstanceType="ml.p4d.24xlarge") != []  # other types are listed all along
    clock.move_to(appears - timedelta(seconds=1))
    assert search(emulator) == []
    clock.move_to(appears)
    found = search(emulator)
    assert found
    assert all(item["ReservedCapacityOfferings"][0]["StartTime"] >= appears for item in found)


def test_an_offering_whose_capacity_is_delisted_cannot_be_bought(
    aws: None, clock: time_machine.Traveller
) -> None:
    gone = START + timedelta(minutes=10)
    emulator = Emulator(events=RecordingSink(), market=MarketConfig(listed_until={"us-east-1/*": gone}))
    offering = search(emulator)[0]
    clock.move_to(gone)  # still within the offering id's 30 minutes, but no longer for sale
    assert search(emulator) == []
    with raises_aws("ValidationException"):
        emulator.call(
            "sagemaker",
            "CreateTrainingPlan",
            {"TrainingPlanName": "late", "TrainingPlanOfferingId": offering["TrainingPlanOfferingId"]},
            region="us-east-1",
        )


def test_churn_withdraws_and_restores_offerings_over_time_the_same_way_for_the_same_seed(
    aws: None, clock: time_machine.Traveller
) -> None:
    market = MarketConfig(churn=0.5, capacity={"*": 64})
    first, second = (
        Emulator(events=RecordingSink(), market=market),
        Emulator(events=RecordingSink(), market=market),
    )
    still = Emulator(events=RecordingSink(), market=MarketConfig(capacity={"*": 64}))
    seen: list[int] = []
    for hours in range(0, 72, 6):
        clock.move_to(START + timedelta(hours=hours))
        window = {"StartTimeAfter": START + timedelta(days=6), "EndTimeBefore": START + timedelta(days=11)}
        counts = [len(search(cloud, DurationHours=24, **window)) for cloud in (first, second, still)]
        assert counts[0] == counts[1]  # seeded: the same seed lists the same things at the same instant
        assert counts[2] == 4  # no churn: every start day of the window offered, all the time
        seen.append(counts[0])
    assert min(seen) < 4  # some periods withdraw pools...
    assert len(set(seen)) > 1  # ...and others list them again


def test_other_buyers_take_a_share_of_the_offerings_between_the_search_and_the_purchase(
    aws: None, clock: time_machine.Traveller
) -> None:
    # Given a market where another buyer takes half the offerings at once, one of 8 instances per pool
    emulator = Emulator(events=RecordingSink(), market=MarketConfig(taken=0.5, capacity={"*": 2}))
    found = search(emulator, DurationHours=24)
    assert len(found) > 4

    refusals: list[AwsError] = []

    def buy(offering: dict[str, Any], name: str) -> bool:
        try:
            emulator.call(
                "sagemaker",
                "CreateTrainingPlan",
                {"TrainingPlanName": name, "TrainingPlanOfferingId": offering["TrainingPlanOfferingId"]},
                region="us-east-1",
            )
        except AwsError as error:
            refusals.append(error)
            return False
        return True

    # When each is bought at once (no virtual time between the search and the purchase)
    bought = [buy(offering, f"p{index}") for index, offering in enumerate(found)]
    # Then some were gone already, the same ones for the same seed, and their capacity with them
    assert 0 < bought.count(False) < len(bought)
    assert all(e.code == "ValidationException" and "no longer available" in e.message for e in refusals)
    again = Emulator(events=RecordingSink(), market=MarketConfig(taken=0.5, capacity={"*": 2}))
    assert [o["TrainingPlanOfferingId"] for o in search(again, DurationHours=24)] == [
        o["TrainingPlanOfferingId"] for o in found
    ]

    def slot(offering: dict[str, Any]) -> tuple[Any, Any]:
        segment = offering["ReservedCapacityOfferings"][0]
        return segment["AvailabilityZone"], segment["StartTime"]

    # A fresh search offers none of the slots bought here or taken by the others (pools of 2 instances)
    gone = {slot(offering) for offering in found}
    assert not gone & {slot(offering) for offering in search(emulator, DurationHours=24)}


def test_another_buyer_may_take_an_offering_a_while_after_the_search(
    aws: None, clock: time_machine.Traveller
) -> None:
    market = MarketConfig(taken=1.0, taken_within=timedelta(minutes=20), capacity={"*": 8})
    emulator = Emulator(events=RecordingSink(), market=market)
    offering = search(emulator, DurationHours=24)[0]
    clock.move_to(START + timedelta(minutes=29))  # within the id's 30 minutes: taken by then all the same
    with raises_aws("ValidationException", "no longer available"):
        emulator.call(
            "sagemaker",
            "CreateTrainingPlan",
            {"TrainingPlanName": "late", "TrainingPlanOfferingId": offering["TrainingPlanOfferingId"]},
            region="us-east-1",
        )
