"""SageMaker training plans: the documented rules (with AWS's error codes) and the plan lifecycle."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from localcloud.emulator import Emulator, MarketConfig
from localcloud.emulator.common import RecordingSink
from tests.localcloud.emulator.support import START, Call, raises_aws


def search(call: Call, **overrides: object) -> list[dict[str, Any]]:
    params: dict[str, Any] = {
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": 2,
        "DurationHours": 72,
        "TargetResources": ["endpoint"],
    }
    params.update(overrides)
    region = str(params.pop("region", "us-east-1"))
    offerings: list[dict[str, Any]] = call(
        "sagemaker", "SearchTrainingPlanOfferings", region=region, **params
    )["TrainingPlanOfferings"]
    return offerings


def test_search_returns_whole_day_offerings_starting_at_1130_utc(call: Call) -> None:
    offerings = search(call, StartTimeAfter=START + timedelta(days=7))
    assert 1 <= len(offerings) <= 5
    for offering in offerings:
        assert offering["DurationHours"] == 72
        assert offering["TargetResources"] == ["endpoint"]
        capacity = offering["ReservedCapacityOfferings"][0]
        assert capacity["InstanceType"] == "ml.p5.48xlarge"
        assert capacity["InstanceCount"] == 2
        assert capacity["StartTime"].timetz() == time(11, 30, tzinfo=UTC)
        assert capacity["StartTime"] >= START + timedelta(days=7)
        assert capacity["EndTime"] - capacity["StartTime"] == timedelta(hours=72)
        assert isinstance(offering["UpfrontFee"], str)
    starts = [offering["ReservedCapacityOfferings"][0]["StartTime"] for offering in offerings]
    assert starts == sorted(starts)  # the first offering is the best match: the earliest


@pytest.mark.parametrize("hours", [36, 12, 183 * 24, 25])
def test_search_matches_the_duration_exactly_so_other_durations_find_nothing(call: Call, hours: int) -> None:
    assert search(call, DurationHours=hours) == []
    assert search(call, DurationHours=48) != []


@pytest.mark.parametrize("count", [3, 5, 128])
def test_instance_count_must_be_a_power_of_two_up_to_64(call: Call, count: int) -> None:
    with raises_aws("ValidationException", f"InstanceCount {count} is not supported"):
        search(call, InstanceCount=count)


def test_g_type_instances_are_not_in_the_training_plan_enum(call: Call) -> None:
    with raises_aws(
        "ValidationException", "failed to satisfy constraint: Member must satisfy enum value set"
    ):
        search(call, InstanceType="ml.g6.12xlarge")


def test_a_count_above_the_quota_answers_resource_limit_exceeded(call: Call) -> None:
    with raises_aws("ResourceLimitExceeded", "'ml.p5.48xlarge for training plan usage' is 32 Instances"):
        search(call, InstanceCount=64)


def test_the_quota_counts_plans_already_bought(aws: None, clock: time_machine.Traveller) -> None:
    emulator = Emulator(
        events=RecordingSink(), market=MarketConfig(training_plan_quotas={"us-east-1/ml.p5.48xlarge": 4})
    )
    offering = emulator.call(
        "sagemaker",
        "SearchTrainingPlanOfferings",
        {
            "InstanceType": "ml.p5.48xlarge",
            "InstanceCount": 4,
            "DurationHours": 24,
            "TargetResources": ["endpoint"],
        },
        region="us-east-1",
    )["TrainingPlanOfferings"][0]
    emulator.call(
        "sagemaker",
        "CreateTrainingPlan",
        {
            "TrainingPlanName": "first",
            "TrainingPlanOfferingId": offering["TrainingPlanOfferingId"],
        },
        region="us-east-1",
    )
    with raises_aws("ResourceLimitExceeded", "current utilization of 4 Instances and a request delta of 1"):
        emulator.call(
            "sagemaker",
            "SearchTrainingPlanOfferings",
            {
                "InstanceType": "ml.p5.48xlarge",
                "InstanceCount": 1,
                "DurationHours": 24,
                "TargetResources": ["endpoint"],
            },
            region="us-east-1",
        )


def test_an_offering_id_expires_30_minutes_after_the_search(
    call: Call, clock: time_machine.Traveller
) -> None:
    offering_id = search(call)[0]["TrainingPlanOfferingId"]
    clock.shift(timedelta(minutes=31))
    with raises_aws("ValidationException", "has expired or is no longer available"):
        call("sagemaker", "CreateTrainingPlan", TrainingPlanName="late", TrainingPlanOfferingId=offering_id)


def test_an_offering_can_be_bought_once(call: Call) -> None:
    offering_id = search(call)[0]["TrainingPlanOfferingId"]
    call("sagemaker", "CreateTrainingPlan", TrainingPlanName="first", TrainingPlanOfferingId=offering_id)
    with raises_aws("ValidationException", "Search for training plan offerings again"):
        call("sagemaker", "CreateTrainingPlan", TrainingPlanName="second", TrainingPlanOfferingId=offering_id)


def test_an_unknown_offering_id_is_rejected(call: Call) -> None:
    with raises_aws("ValidationException", "tpo-doesnotexist"):
        call(
            "sagemaker", "CreateTrainingPlan", TrainingPlanName="x", TrainingPlanOfferingId="tpo-doesnotexist"
        )


def test_a_plan_name_can_be_used_once(call: Call) -> None:
    first, second = search(call)[:2]
    call(
        "sagemaker",
        "CreateTrainingPlan",
        TrainingPlanName="req-123",
        TrainingPlanOfferingId=first["TrainingPlanOfferingId"],
    )
    with raises_aws("ResourceInUse", "training-plan/req-123 already exists"):
        call(
            "sagemaker",
            "CreateTrainingPlan",
            TrainingPlanName="req-123",
            TrainingPlanOfferingId=second["TrainingPlanOfferingId"],
        )


def test_an_unknown_plan_answers_resource_not_found(call: Call) -> None:
    with raises_aws("ResourceNotFound", "nope"):
        call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="nope")


def test_target_resources_are_separate_pools(aws: None, clock: time_machine.Traveller) -> None:
    # Every pool holds exactly 2 instances: buying them for endpoints leaves training-job capacity intact.
    emulator = Emulator(events=RecordingSink(), market=MarketConfig(capacity={"*": 2}))

    def offerings(target: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = emulator.call(
            "sagemaker",
            "SearchTrainingPlanOfferings",
            {
                "InstanceType": "ml.p5.48xlarge",
                "InstanceCount": 2,
                "DurationHours": 24,
                "TargetResources": [target],
                "StartTimeAfter": START,
                "EndTimeBefore": START + timedelta(days=2),
            },
            region="us-east-1",
        )["TrainingPlanOfferings"]
        return found

    first_day = offerings("endpoint")
    assert len(first_day) == 1
    emulator.call(
        "sagemaker",
        "CreateTrainingPlan",
        {
            "TrainingPlanName": "ep",
            "TrainingPlanOfferingId": first_day[0]["TrainingPlanOfferingId"],
        },
        region="us-east-1",
    )
    # The 3 zones each hold 2 instances that day; one zone is now taken for endpoints.
    assert (
        emulator.market.available(
            "sagemaker:endpoint",
            "us-east-1",
            "ml.p5.48xlarge",
            "us-east-1a",
            first_day[0]["ReservedCapacityOfferings"][0]["StartTime"].date(),
        )
        == 0
    )
    assert offerings("training-job")[0]["ReservedCapacityOfferings"][0]["AvailabilityZone"] == "us-east-1a"


def test_a_search_names_one_target_resource(call: Call) -> None:
    with raises_aws("ValidationException", "exactly one target resource"):
        search(call, TargetResources=["endpoint", "training-job"])


def test_plan_lifecycle_pending_scheduled_active_expired(call: Call, clock: time_machine.Traveller) -> None:
    offering = search(call, DurationHours=24)[0]
    arn = call(
        "sagemaker",
        "CreateTrainingPlan",
        TrainingPlanName="life",
        TrainingPlanOfferingId=offering["TrainingPlanOfferingId"],
    )["TrainingPlanArn"]
    assert arn == "arn:aws:sagemaker:us-east-1:123456789012:training-plan/life"
    start = offering["ReservedCapacityOfferings"][0]["StartTime"]

    def status() -> str:
        return str(call("sagemaker", "DescribeTrainingPlan", TrainingPlanName=arn)["Status"])

    assert status() == "Pending"
    clock.shift(timedelta(minutes=5))
    assert status() == "Scheduled"
    clock.move_to(start - timedelta(seconds=1))
    assert status() == "Scheduled"
    clock.move_to(start)
    described = call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="life")
    assert described["Status"] == "Active"
    assert described["AvailableInstanceCount"] == 2
    assert described["UpfrontFee"] == offering["UpfrontFee"]
    clock.move_to(start + timedelta(hours=24))
    assert status() == "Expired"
    listed = call("sagemaker", "ListTrainingPlans", Filters=[{"Name": "Status", "Value": "Expired"}])
    assert [plan["TrainingPlanName"] for plan in listed["TrainingPlanSummaries"]] == ["life"]


def test_plan_fee_is_70_to_75_percent_below_on_demand(emulator: Emulator, call: Call) -> None:
    for offering in search(call, InstanceCount=1, DurationHours=24):
        hourly = Decimal(str(offering["UpfrontFee"])) / 24
        saving = 1 - hourly / emulator.market.on_demand_usd_per_hour("us-east-1", "ml.p5.48xlarge")
        assert Decimal("0.70") <= saving <= Decimal("0.75")


def test_unknown_region_and_regions_outside_the_market(call: Call) -> None:
    with raises_aws("UnrecognizedClientException"):
        search(call, region="xx-nowhere-1")
    assert search(call, region="sa-east-1") == []


def test_p5_has_no_capacity_in_ap_northeast_1_so_alternatives_must_come_from_elsewhere(call: Call) -> None:
    assert (
        search(call, region="ap-northeast-1", StartTimeAfter=START, EndTimeBefore=START + timedelta(weeks=8))
        == []
    )
    assert search(call, region="us-west-2") != []


def test_quota_does_not_count_expired_plans(call: Call, clock: time_machine.Traveller) -> None:
    offering = search(call, InstanceCount=32, DurationHours=24)[0]
    call(
        "sagemaker",
        "CreateTrainingPlan",
        TrainingPlanName="big",
        TrainingPlanOfferingId=offering["TrainingPlanOfferingId"],
    )
    with raises_aws("ResourceLimitExceeded"):
        search(call, InstanceCount=1)
    clock.move_to(offering["ReservedCapacityOfferings"][0]["EndTime"])
    assert datetime.now(UTC) >= offering["ReservedCapacityOfferings"][0]["EndTime"]
    assert search(call, InstanceCount=1) != []
