"""Extending in place: training plan extensions and capacity block extensions, as AWS documents them
(EC2 user guide "Extend Capacity Blocks"; SageMaker developer guide "Extend a training plan")."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine

from localcloud.emulator import Emulator, MarketConfig
from localcloud.emulator.common import RecordingSink
from localcloud.faults import FaultKind
from tests.localcloud.emulator.support import START, Call, deploy_on_plan, raises_aws, run_clock


@pytest.fixture
def emulator(aws: None, clock: time_machine.Traveller, sink: RecordingSink) -> Emulator:
    """Every pool holds 8 instances: an extension always finds room unless a test takes it."""
    return Emulator(events=sink, market=MarketConfig(capacity={"*": 8}))


# ------------------------------------------------------------------------------------------ training plans


def buy_plan(call: Call, clock: time_machine.Traveller, *, days: int = 1, name: str = "p1") -> dict[str, Any]:
    offering = call(
        "sagemaker",
        "SearchTrainingPlanOfferings",
        InstanceType="ml.p5.48xlarge",
        InstanceCount=2,
        DurationHours=days * 24,
        TargetResources=["endpoint"],
    )["TrainingPlanOfferings"][0]
    arn = call(
        "sagemaker",
        "CreateTrainingPlan",
        TrainingPlanName=name,
        TrainingPlanOfferingId=offering["TrainingPlanOfferingId"],
    )["TrainingPlanArn"]
    clock.shift(timedelta(minutes=5))  # paid: Scheduled
    return call("sagemaker", "DescribeTrainingPlan", TrainingPlanName=arn)


def plan_offers(call: Call, arn: str, **params: Any) -> list[dict[str, Any]]:
    answer = call("sagemaker", "SearchTrainingPlanOfferings", TrainingPlanArn=arn, **params)
    assert answer["TrainingPlanOfferings"] == []
    found: list[dict[str, Any]] = answer["TrainingPlanExtensionOfferings"]
    return found


def test_a_plan_extension_starts_at_its_end_in_its_zone_and_moves_the_end_only_once_paid(
    emulator: Emulator, call: Call, clock: time_machine.Traveller
) -> None:
    plan = buy_plan(call, clock)
    end = plan["EndTime"]
    (offer,) = plan_offers(call, plan["TrainingPlanArn"], DurationHours=24)
    assert offer["TrainingPlanExtensionOfferingId"].startswith("tpeo-")
    assert (offer["StartDate"], offer["EndDate"]) == (end, end + timedelta(days=1))
    assert offer["AvailabilityZone"] == plan["ReservedCapacitySummaries"][0]["AvailabilityZone"]
    assert offer["DurationHours"] == 24
    assert float(offer["UpfrontFee"]) > 0

    (bought,) = call(
        "sagemaker",
        "ExtendTrainingPlan",
        TrainingPlanExtensionOfferingId=offer["TrainingPlanExtensionOfferingId"],
    )["TrainingPlanExtensions"]
    assert (bought["Status"], bought["PaymentStatus"]) == ("Pending", "Pending")
    assert call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="p1")["EndTime"] == end  # not paid yet

    clock.shift(timedelta(minutes=5))
    described = call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="p1")
    assert described["EndTime"] == end + timedelta(days=1)
    assert described["DurationHours"] == 48
    assert described["UpfrontFee"] == plan["UpfrontFee"]  # the extension has its own fee
    (history,) = call(
        "sagemaker", "DescribeTrainingPlanExtensionHistory", TrainingPlanArn=plan["TrainingPlanArn"]
    )["TrainingPlanExtensions"]
    assert (history["PaymentStatus"], history["Status"], history["UpfrontFee"]) == (
        "Completed",
        "Scheduled",
        offer["UpfrontFee"],
    )
    clock.move_to(end + timedelta(hours=1))
    assert call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="p1")["Status"] == "Active"
    clock.move_to(end + timedelta(days=1))
    assert call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="p1")["Status"] == "Expired"


def test_an_extended_plan_keeps_its_endpoint_serving_until_the_new_end_only(
    emulator: Emulator, call: Call, clock: time_machine.Traveller
) -> None:
    deployed = deploy_on_plan(emulator, clock)
    (offer,) = plan_offers(call, deployed.plan_arn)
    call(
        "sagemaker",
        "ExtendTrainingPlan",
        TrainingPlanExtensionOfferingId=offer["TrainingPlanExtensionOfferingId"],
    )
    params = {"EndpointName": deployed.endpoint, "InferenceComponentName": "model-a", "Body": b"{}"}
    clock.move_to(deployed.plan_end + timedelta(hours=2))
    assert call("sagemaker-runtime", "InvokeEndpoint", ContentType="application/json", **params)["Body"]
    clock.move_to(deployed.plan_end + timedelta(days=1, minutes=1))
    with raises_aws("ValidationError", "no capacity"):
        call("sagemaker-runtime", "InvokeEndpoint", ContentType="application/json", **params)


@pytest.mark.parametrize(
    "fault", [FaultKind.PAYMENT_FAILED, FaultKind.INSUFFICIENT_CAPACITY, FaultKind.STUCK]
)
def test_a_failed_plan_extension_payment_keeps_the_old_end(
    call: Call, clock: time_machine.Traveller, fault: FaultKind
) -> None:
    plan = buy_plan(call, clock)
    (offer,) = plan_offers(call, plan["TrainingPlanArn"])
    call(
        "sagemaker",
        "ExtendTrainingPlan",
        faults=frozenset({fault}),
        TrainingPlanExtensionOfferingId=offer["TrainingPlanExtensionOfferingId"],
    )
    clock.shift(timedelta(minutes=10))
    expected = "Pending" if fault is FaultKind.STUCK else "Failed"
    (history,) = call(
        "sagemaker", "DescribeTrainingPlanExtensionHistory", TrainingPlanArn=plan["TrainingPlanArn"]
    )["TrainingPlanExtensions"]
    assert history["PaymentStatus"] == expected
    clock.move_to(plan["EndTime"] - timedelta(minutes=35))  # a payment still pending fails here
    (history,) = call(
        "sagemaker", "DescribeTrainingPlanExtensionHistory", TrainingPlanArn=plan["TrainingPlanArn"]
    )["TrainingPlanExtensions"]
    assert history["PaymentStatus"] == "Failed"
    assert call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="p1")["EndTime"] == plan["EndTime"]
    clock.move_to(plan["EndTime"])
    assert call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="p1")["Status"] == "Expired"


def test_a_plan_extension_is_bought_once_and_a_stale_offering_is_refused(
    call: Call, clock: time_machine.Traveller
) -> None:
    plan = buy_plan(call, clock)
    first, second = (plan_offers(call, plan["TrainingPlanArn"])[0] for _ in range(2))
    call(
        "sagemaker",
        "ExtendTrainingPlan",
        TrainingPlanExtensionOfferingId=first["TrainingPlanExtensionOfferingId"],
    )
    with raises_aws("ValidationException", "payment is pending"):  # no second extension while one is pending
        call(
            "sagemaker",
            "ExtendTrainingPlan",
            TrainingPlanExtensionOfferingId=first["TrainingPlanExtensionOfferingId"],
        )
    clock.shift(timedelta(minutes=5))
    for offer in (first, second):  # bought; starting at the old end
        with raises_aws("ValidationException", "Search for extension offerings again"):
            call(
                "sagemaker",
                "ExtendTrainingPlan",
                TrainingPlanExtensionOfferingId=offer["TrainingPlanExtensionOfferingId"],
            )
    (fresh,) = plan_offers(call, plan["TrainingPlanArn"])
    assert fresh["StartDate"] == plan["EndTime"] + timedelta(days=1)
    with raises_aws("ResourceNotFound", "tpeo-unknown"):
        call("sagemaker", "ExtendTrainingPlan", TrainingPlanExtensionOfferingId="tpeo-unknown")


def test_only_an_active_or_scheduled_plan_can_be_extended_and_only_by_whole_days(
    call: Call, clock: time_machine.Traveller
) -> None:
    offering = call(
        "sagemaker",
        "SearchTrainingPlanOfferings",
        InstanceType="ml.p5.48xlarge",
        InstanceCount=1,
        DurationHours=24,
        TargetResources=["endpoint"],
    )["TrainingPlanOfferings"][0]
    arn = call(
        "sagemaker",
        "CreateTrainingPlan",
        TrainingPlanName="new",
        TrainingPlanOfferingId=offering["TrainingPlanOfferingId"],
    )["TrainingPlanArn"]
    with raises_aws("ValidationException", "is Pending: only an active or scheduled reservation"):
        plan_offers(call, arn)
    clock.shift(timedelta(minutes=5))
    (offer,) = plan_offers(call, arn, DurationHours=36)
    assert offer["DurationHours"] == 48  # rounded up to whole days
    with raises_aws("ValidationException", "InstanceType cannot be combined with TrainingPlanArn"):
        plan_offers(call, arn, InstanceType="ml.p5.48xlarge")
    with raises_aws("ValidationException", "at most 182 days"):
        plan_offers(call, arn, DurationHours=182 * 24)
    with raises_aws("ResourceNotFound", "does not exist"):
        plan_offers(call, arn.replace("/new", "/other"))
    clock.move_to(offering["ReservedCapacityOfferings"][0]["EndTime"])
    with raises_aws("ValidationException", "is Expired"):
        plan_offers(call, arn)


def test_no_plan_extension_offering_without_free_capacity(aws: None, clock: time_machine.Traveller) -> None:
    emulator = Emulator(events=RecordingSink(), market=MarketConfig(capacity={"*": 2}))

    def call(service: str, operation: str, faults: frozenset[FaultKind] = frozenset(), **params: Any) -> Any:
        return emulator.call(service, operation, params, region="us-east-1", faults=faults)

    plan = buy_plan(call, clock)
    end = plan["EndTime"]
    zone = plan["ReservedCapacitySummaries"][0]["AvailabilityZone"]
    taken = next(
        offer
        for offer in call(
            "sagemaker",
            "SearchTrainingPlanOfferings",
            InstanceType="ml.p5.48xlarge",
            InstanceCount=2,
            DurationHours=24,
            StartTimeAfter=end - timedelta(hours=1),
            TargetResources=["endpoint"],
        )["TrainingPlanOfferings"]
        if offer["ReservedCapacityOfferings"][0]["AvailabilityZone"] == zone
        and offer["ReservedCapacityOfferings"][0]["StartTime"] == end
    )
    call(
        "sagemaker",
        "CreateTrainingPlan",
        TrainingPlanName="other",
        TrainingPlanOfferingId=taken["TrainingPlanOfferingId"],
    )
    assert plan_offers(call, plan["TrainingPlanArn"]) == []
    assert (
        call(
            "sagemaker",
            "SearchTrainingPlanOfferings",
            TrainingPlanArn=plan["TrainingPlanArn"],
            DurationHours=48,
        )["TrainingPlanExtensionOfferings"]
        == []
    )


# ------------------------------------------------------------------------------------------ capacity blocks


def buy_block(call: Call, clock: time_machine.Traveller, *, days: int = 2) -> dict[str, Any]:
    offering = call(
        "ec2",
        "DescribeCapacityBlockOfferings",
        InstanceType="p5.48xlarge",
        InstanceCount=2,
        CapacityDurationHours=days * 24,
    )["CapacityBlockOfferings"][0]
    reservation: dict[str, Any] = call(
        "ec2",
        "PurchaseCapacityBlock",
        CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
        InstancePlatform="Linux/UNIX",
    )["CapacityReservation"]
    clock.shift(timedelta(minutes=5))
    return reservation


def block_offers(call: Call, reservation_id: str, hours: int = 24) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = call(
        "ec2",
        "DescribeCapacityBlockExtensionOfferings",
        CapacityReservationId=reservation_id,
        CapacityBlockExtensionDurationHours=hours,
    )["CapacityBlockExtensionOfferings"]
    return found


def describe_block(call: Call, reservation_id: str) -> dict[str, Any]:
    found: dict[str, Any] = call(
        "ec2", "DescribeCapacityReservations", CapacityReservationIds=[reservation_id]
    )["CapacityReservations"][0]
    return found


def extend_block(call: Call, reservation_id: str, offer: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    (bought,) = call(
        "ec2",
        "PurchaseCapacityBlockExtension",
        CapacityBlockExtensionOfferingId=offer["CapacityBlockExtensionOfferingId"],
        CapacityReservationId=reservation_id,
        **kwargs,
    )["CapacityBlockExtensions"]
    result: dict[str, Any] = bought
    return result


@pytest.mark.parametrize("hours", [24, 14 * 24, 21 * 24])
def test_block_extensions_are_days_up_to_14_then_weeks(
    call: Call, clock: time_machine.Traveller, hours: int
) -> None:
    reservation = buy_block(call, clock)
    (offer,) = block_offers(call, reservation["CapacityReservationId"], hours)
    assert offer["CapacityBlockExtensionStartDate"] == reservation["EndDate"]
    assert offer["CapacityBlockExtensionEndDate"] == reservation["EndDate"] + timedelta(hours=hours)
    assert offer["AvailabilityZone"] == reservation["AvailabilityZone"]
    assert (offer["InstanceType"], offer["InstanceCount"]) == ("p5.48xlarge", 2)


@pytest.mark.parametrize("hours", [36, 15 * 24, 0])
def test_other_block_extension_durations_are_invalid(
    call: Call, clock: time_machine.Traveller, hours: int
) -> None:
    reservation = buy_block(call, clock)
    with raises_aws("InvalidParameterValue", f"extension duration of {hours} hours is not supported"):
        block_offers(call, reservation["CapacityReservationId"], hours)


def test_an_extended_block_ends_later_keeps_its_instances_and_warns_for_the_new_end(
    emulator: Emulator, call: Call, sink: RecordingSink, clock: time_machine.Traveller
) -> None:
    reservation = buy_block(call, clock)
    block_id, start, end = (
        reservation["CapacityReservationId"],
        reservation["StartDate"],
        reservation["EndDate"],
    )
    clock.move_to(start + timedelta(minutes=1))
    emulator.capacity_blocks.advance(start + timedelta(minutes=1))
    launched = call(
        "ec2",
        "RunInstances",
        ImageId="ami-12345678",
        InstanceType="p5.48xlarge",
        MinCount=2,
        MaxCount=2,
        InstanceMarketOptions={"MarketType": "capacity-block"},
        CapacityReservationSpecification={"CapacityReservationTarget": {"CapacityReservationId": block_id}},
    )["Instances"]
    (offer,) = block_offers(call, block_id)
    bought = extend_block(call, block_id, offer)
    assert bought["CapacityBlockExtensionStatus"] == "payment-pending"
    assert describe_block(call, block_id)["EndDate"] == end
    with raises_aws("IncorrectState", "payment is pending"):
        block_offers(call, block_id)
    now = start + timedelta(minutes=1)
    run_clock(emulator, clock, now, end + timedelta(hours=2))
    assert describe_block(call, block_id)["EndDate"] == end + timedelta(days=1)
    assert describe_block(call, block_id)["State"] == "active"
    states = call("ec2", "DescribeInstances", InstanceIds=[i["InstanceId"] for i in launched])["Reservations"]
    assert {i["State"]["Name"] for r in states for i in r["Instances"]} == {"running"}
    (history,) = call("ec2", "DescribeCapacityBlockExtensionHistory", CapacityReservationIds=[block_id])[
        "CapacityBlockExtensions"
    ]
    assert history["CapacityBlockExtensionStatus"] == "payment-succeeded"
    run_clock(emulator, clock, end + timedelta(hours=2), end + timedelta(days=1, hours=1))
    warnings = sink.of_type("Capacity Block Expiration Warning")
    assert [w["detail"]["end-date"] for w in warnings] == [
        (end + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ]
    assert describe_block(call, block_id)["State"] == "expired"
    states = call("ec2", "DescribeInstances", InstanceIds=[i["InstanceId"] for i in launched])["Reservations"]
    assert {i["State"]["Name"] for r in states for i in r["Instances"]} == {"terminated"}


@pytest.mark.parametrize("fault", [FaultKind.PAYMENT_FAILED, FaultKind.STUCK])
def test_a_failed_block_extension_payment_keeps_the_old_end(
    emulator: Emulator, call: Call, clock: time_machine.Traveller, fault: FaultKind
) -> None:
    reservation = buy_block(call, clock)
    block_id, end = reservation["CapacityReservationId"], reservation["EndDate"]
    (offer,) = block_offers(call, block_id)
    extend_block(call, block_id, offer, faults=frozenset({fault}))
    clock.shift(timedelta(minutes=5))
    (history,) = call("ec2", "DescribeCapacityBlockExtensionHistory")["CapacityBlockExtensions"]
    assert history["CapacityBlockExtensionStatus"] == (
        "payment-pending" if fault is FaultKind.STUCK else "payment-failed"
    )
    clock.move_to(end - timedelta(minutes=35))
    (history,) = call("ec2", "DescribeCapacityBlockExtensionHistory")["CapacityBlockExtensions"]
    assert history["CapacityBlockExtensionStatus"] == "payment-failed"
    assert describe_block(call, block_id)["EndDate"] == end
    clock.move_to(end)
    assert describe_block(call, block_id)["State"] == "expired"


def test_block_extension_rules(call: Call, clock: time_machine.Traveller) -> None:
    reservation = buy_block(call, clock)
    block_id = reservation["CapacityReservationId"]
    other = buy_block(call, clock)["CapacityReservationId"]
    (offer,) = block_offers(call, block_id)
    with raises_aws("InvalidParameterValue", "not for this Capacity Block"):
        extend_block(call, other, offer)
    with raises_aws("InvalidCapacityReservationId.NotFound", "cr-unknown"):
        block_offers(call, "cr-unknown")
    with raises_aws("InsufficientInstanceCapacity", "extension"):
        extend_block(call, block_id, offer, faults=frozenset({FaultKind.INSUFFICIENT_CAPACITY}))
    assert call("ec2", "DescribeCapacityBlockExtensionHistory")["CapacityBlockExtensions"] == []
    assert (
        call(
            "ec2",
            "DescribeCapacityBlockExtensionOfferings",
            faults=frozenset({FaultKind.INSUFFICIENT_CAPACITY}),
            CapacityReservationId=block_id,
            CapacityBlockExtensionDurationHours=24,
        )["CapacityBlockExtensionOfferings"]
        == []
    )
    clock.shift(timedelta(minutes=31))
    with raises_aws("InvalidParameterValue", "has expired"):
        extend_block(call, block_id, offer)
    with raises_aws("InvalidParameterValue", "at most 182 days"):
        block_offers(call, block_id, 182 * 24)
    with raises_aws("DryRunOperation", "DryRun flag is set"):
        call(
            "ec2",
            "PurchaseCapacityBlockExtension",
            DryRun=True,
            CapacityBlockExtensionOfferingId=offer["CapacityBlockExtensionOfferingId"],
            CapacityReservationId=block_id,
        )
    clock.move_to(reservation["EndDate"] - timedelta(minutes=59))
    with raises_aws("InvalidParameterValue", "at least 1 hour before its end"):
        block_offers(call, block_id)


def test_a_block_far_ahead_cannot_be_extended_yet(aws: None, clock: time_machine.Traveller) -> None:
    emulator = Emulator(events=RecordingSink(), market=MarketConfig(capacity={"*": 8}))
    offering = emulator.call(
        "ec2",
        "DescribeCapacityBlockOfferings",
        {
            "InstanceType": "p5.48xlarge",
            "InstanceCount": 1,
            "CapacityDurationHours": 14 * 24,
            "StartDateRange": START + timedelta(weeks=7),
        },
        region="us-east-1",
    )["CapacityBlockOfferings"][0]
    reservation = emulator.call(
        "ec2",
        "PurchaseCapacityBlock",
        {"CapacityBlockOfferingId": offering["CapacityBlockOfferingId"], "InstancePlatform": "Linux/UNIX"},
        region="us-east-1",
    )["CapacityReservation"]
    clock.shift(timedelta(minutes=5))
    with raises_aws("InvalidParameterValue", "56 days"):
        emulator.call(
            "ec2",
            "DescribeCapacityBlockExtensionOfferings",
            {
                "CapacityReservationId": reservation["CapacityReservationId"],
                "CapacityBlockExtensionDurationHours": 24,
            },
            region="us-east-1",
        )
    assert isinstance(reservation["EndDate"], datetime)


def test_the_newer_sagemaker_extension_actions_are_authorized_on_star_only() -> None:
    from localcloud.iam.sar import reference

    for name in ("sagemaker:ExtendTrainingPlan", "sagemaker:DescribeTrainingPlanExtensionHistory"):
        assert reference().action(name).resource_types == ()
    # What the pinned reference has keeps its resource types (EC2's extension actions are in it).
    purchase = reference().action("ec2:PurchaseCapacityBlockExtension")
    assert [rt.name for rt, _ in purchase.resource_types] == ["capacity-reservation"]
