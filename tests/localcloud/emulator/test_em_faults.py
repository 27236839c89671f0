"""The behavioural faults the emulator applies: ``insufficient_capacity`` and ``stuck``, per operation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import time_machine

from localcloud.emulator import Emulator
from localcloud.faults import FaultKind, FaultRule
from tests.localcloud.emulator.support import Call, deploy_on_plan, raises_aws

NO_CAPACITY = frozenset({FaultKind.INSUFFICIENT_CAPACITY})
STUCK = frozenset({FaultKind.STUCK})
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"


def plan_offering(call: Call) -> dict[str, Any]:
    offering: dict[str, Any] = call(
        "sagemaker",
        "SearchTrainingPlanOfferings",
        InstanceType="ml.p5.48xlarge",
        InstanceCount=1,
        DurationHours=24,
        TargetResources=["endpoint"],
    )["TrainingPlanOfferings"][0]
    return offering


def test_insufficient_capacity_empties_searches(call: Call) -> None:
    assert (
        call(
            "sagemaker",
            "SearchTrainingPlanOfferings",
            faults=NO_CAPACITY,
            InstanceType="ml.p5.48xlarge",
            InstanceCount=1,
            DurationHours=24,
            TargetResources=["endpoint"],
        )["TrainingPlanOfferings"]
        == []
    )
    assert (
        call(
            "ec2",
            "DescribeCapacityBlockOfferings",
            faults=NO_CAPACITY,
            InstanceType="p5.48xlarge",
            InstanceCount=1,
            CapacityDurationHours=24,
        )["CapacityBlockOfferings"]
        == []
    )


def test_insufficient_capacity_makes_a_plan_fail_and_returns_its_capacity(
    emulator: Emulator, call: Call, clock: time_machine.Traveller
) -> None:
    offering = plan_offering(call)
    call(
        "sagemaker",
        "CreateTrainingPlan",
        faults=NO_CAPACITY,
        TrainingPlanName="doomed",
        TrainingPlanOfferingId=offering["TrainingPlanOfferingId"],
    )
    assert call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="doomed")["Status"] == "Pending"
    clock.shift(timedelta(minutes=5))
    plan = call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="doomed")
    assert plan["Status"] == "Failed"
    assert "insufficient capacity" in plan["StatusMessage"]
    assert plan["AvailableInstanceCount"] == 0
    assert emulator.training_plans.utilization("us-east-1", "ml.p5.48xlarge", datetime.now(UTC)) == 0
    reserved = offering["ReservedCapacityOfferings"][0]
    pool = (
        "sagemaker:endpoint",
        "us-east-1",
        "ml.p5.48xlarge",
        reserved["AvailabilityZone"],
        reserved["StartTime"].date(),
    )
    assert emulator.market.available(*pool) == emulator.market.pool_size(*pool)  # the instance went back


def test_stuck_plan_stays_pending(call: Call, clock: time_machine.Traveller) -> None:
    offering = plan_offering(call)
    call(
        "sagemaker",
        "CreateTrainingPlan",
        faults=STUCK,
        TrainingPlanName="stuck",
        TrainingPlanOfferingId=offering["TrainingPlanOfferingId"],
    )
    clock.shift(timedelta(days=10))
    assert call("sagemaker", "DescribeTrainingPlan", TrainingPlanName="stuck")["Status"] == "Pending"


def test_capacity_block_purchase_faults(
    emulator: Emulator, call: Call, clock: time_machine.Traveller
) -> None:
    found = call(
        "ec2",
        "DescribeCapacityBlockOfferings",
        InstanceType="p5.48xlarge",
        InstanceCount=1,
        CapacityDurationHours=24,
    )["CapacityBlockOfferings"]
    with raises_aws("InsufficientInstanceCapacity", "not enough capacity") as info:
        call(
            "ec2",
            "PurchaseCapacityBlock",
            faults=NO_CAPACITY,
            InstancePlatform="Linux/UNIX",
            CapacityBlockOfferingId=found[0]["CapacityBlockOfferingId"],
        )
    assert info.value.status == 500
    assert call("ec2", "DescribeCapacityReservations")["CapacityReservations"] == []  # nothing bought
    reservation = call(
        "ec2",
        "PurchaseCapacityBlock",
        faults=STUCK,
        InstancePlatform="Linux/UNIX",
        CapacityBlockOfferingId=found[0]["CapacityBlockOfferingId"],
    )["CapacityReservation"]
    clock.move_to(found[0]["EndDate"] + timedelta(days=1))
    assert (
        call(
            "ec2",
            "DescribeCapacityReservations",
            CapacityReservationIds=[reservation["CapacityReservationId"]],
        )["CapacityReservations"][0]["State"]
        == "payment-pending"
    )
    assert emulator.capacity_blocks.next_due(found[0]["EndDate"]) is None  # a stuck block sends no events


def endpoint_on_plan(emulator: Emulator, call: Call, clock: time_machine.Traveller) -> str:
    offering = plan_offering(call)
    plan_arn = call(
        "sagemaker",
        "CreateTrainingPlan",
        TrainingPlanName="p",
        TrainingPlanOfferingId=offering["TrainingPlanOfferingId"],
    )["TrainingPlanArn"]
    clock.move_to(offering["ReservedCapacityOfferings"][0]["StartTime"] + timedelta(minutes=1))
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "InstanceType": "ml.p5.48xlarge",
                "InitialInstanceCount": 1,
                "CapacityReservationConfig": {"MlReservationArn": plan_arn},
            }
        ],
    )
    return str(plan_arn)


def test_create_endpoint_faults(emulator: Emulator, call: Call, clock: time_machine.Traveller) -> None:
    endpoint_on_plan(emulator, call, clock)
    call("sagemaker", "CreateEndpoint", faults=NO_CAPACITY, EndpointName="failing", EndpointConfigName="c")
    clock.shift(timedelta(minutes=4))
    failed = call("sagemaker", "DescribeEndpoint", EndpointName="failing")
    assert failed["EndpointStatus"] == "Failed"
    assert "InsufficientInstanceCapacity" in failed["FailureReason"]
    call("sagemaker", "DeleteEndpoint", EndpointName="failing")  # a Failed endpoint can be deleted
    clock.shift(timedelta(minutes=2))
    call("sagemaker", "CreateEndpoint", faults=STUCK, EndpointName="stuck", EndpointConfigName="c")
    clock.shift(timedelta(hours=6))
    assert call("sagemaker", "DescribeEndpoint", EndpointName="stuck")["EndpointStatus"] == "Creating"


def test_update_and_delete_endpoint_faults(
    emulator: Emulator, call: Call, clock: time_machine.Traveller
) -> None:
    deployed = deploy_on_plan(emulator, clock, components=())
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="other",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "InstanceType": "ml.p5.48xlarge",
                "InitialInstanceCount": 1,
                "CapacityReservationConfig": {"MlReservationArn": deployed.plan_arn},
            }
        ],
    )
    call(
        "sagemaker",
        "UpdateEndpoint",
        faults=NO_CAPACITY,
        EndpointName=deployed.endpoint,
        EndpointConfigName="other",
    )
    clock.shift(timedelta(minutes=4))
    rolled_back = call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)
    assert (rolled_back["EndpointStatus"], rolled_back["EndpointConfigName"]) == (
        "InService",
        deployed.config,
    )
    assert "InsufficientInstanceCapacity" in rolled_back["FailureReason"]
    call(
        "sagemaker",
        "UpdateEndpoint",
        faults=STUCK,
        EndpointName=deployed.endpoint,
        EndpointConfigName="other",
    )
    clock.shift(timedelta(days=1))
    assert (
        call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)["EndpointStatus"] == "Updating"
    )


def test_stuck_delete_keeps_deleting(emulator: Emulator, call: Call, clock: time_machine.Traveller) -> None:
    deployed = deploy_on_plan(emulator, clock)
    call("sagemaker", "DeleteInferenceComponent", faults=STUCK, InferenceComponentName="model-a")
    clock.shift(timedelta(hours=1))
    assert (
        call("sagemaker", "DescribeInferenceComponent", InferenceComponentName="model-a")[
            "InferenceComponentStatus"
        ]
        == "Deleting"
    )
    with raises_aws("ValidationException", "still has 1 inference component"):
        call("sagemaker", "DeleteEndpoint", EndpointName=deployed.endpoint)


def test_stuck_endpoint_delete(emulator: Emulator, call: Call, clock: time_machine.Traveller) -> None:
    deployed = deploy_on_plan(emulator, clock, components=())
    call("sagemaker", "DeleteEndpoint", faults=STUCK, EndpointName=deployed.endpoint)
    clock.shift(timedelta(days=1))
    assert (
        call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)["EndpointStatus"] == "Deleting"
    )
    assert [item.status for item in emulator.billable_resources() if item.resource_type == "endpoint"] == [
        "Deleting"
    ]


def test_inference_component_faults(emulator: Emulator, call: Call, clock: time_machine.Traveller) -> None:
    deployed = deploy_on_plan(emulator, clock, components=("model-a",))
    spec = {
        "Container": {"Image": "example.com/llm:1"},
        "ComputeResourceRequirements": {
            "NumberOfAcceleratorDevicesRequired": 1,
            "MinMemoryRequiredInMb": 1024,
        },
    }
    call(
        "sagemaker",
        "CreateInferenceComponent",
        faults=NO_CAPACITY,
        InferenceComponentName="failing",
        EndpointName=deployed.endpoint,
        Specification=spec,
        RuntimeConfig={"CopyCount": 1},
    )
    call(
        "sagemaker",
        "CreateInferenceComponent",
        faults=STUCK,
        InferenceComponentName="stuck",
        EndpointName=deployed.endpoint,
        Specification=spec,
        RuntimeConfig={"CopyCount": 1},
    )
    call(
        "sagemaker",
        "UpdateInferenceComponentRuntimeConfig",
        faults=STUCK,
        InferenceComponentName="model-a",
        DesiredRuntimeConfig={"CopyCount": 3},
    )
    clock.shift(timedelta(hours=1))
    failed = call("sagemaker", "DescribeInferenceComponent", InferenceComponentName="failing")
    assert failed["InferenceComponentStatus"] == "Failed"
    assert "InsufficientInstanceCapacity" in failed["FailureReason"]
    assert (
        call("sagemaker", "DescribeInferenceComponent", InferenceComponentName="stuck")[
            "InferenceComponentStatus"
        ]
        == "Creating"
    )
    updating = call("sagemaker", "DescribeInferenceComponent", InferenceComponentName="model-a")
    assert updating["InferenceComponentStatus"] == "Updating"
    assert updating["RuntimeConfig"] == {"DesiredCopyCount": 3, "CurrentCopyCount": 1}


def test_insufficient_capacity_on_invoke(
    emulator: Emulator, call: Call, clock: time_machine.Traveller
) -> None:
    deployed = deploy_on_plan(emulator, clock)
    with raises_aws("ValidationError", "Inference Component has no capacity"):
        call(
            "sagemaker-runtime",
            "InvokeEndpoint",
            faults=NO_CAPACITY,
            EndpointName=deployed.endpoint,
            InferenceComponentName="model-a",
            Body=b"{}",
        )


# ----------------------------------------------------------------------- stale_listing (eventual consistency)


def _stale(seconds: float) -> list[FaultRule]:
    return [FaultRule(kind=FaultKind.STALE_LISTING, delay_seconds=seconds)]


def test_a_stale_listing_misses_a_component_just_created_and_shows_one_just_deleted(
    emulator: Emulator, clock: time_machine.Traveller
) -> None:
    """AWS listings are eventually consistent: for ``delay_seconds`` after a change, a read may answer what
    was true before it. (The local cloud used to agree instantly, always.)"""
    deployed = deploy_on_plan(emulator, clock, components=("model-a",))
    (old,) = deployed.components

    def listed(faults: list[FaultRule]) -> list[tuple[str, str]]:
        answer = emulator.call(
            "sagemaker",
            "ListInferenceComponents",
            {"EndpointNameEquals": deployed.endpoint},
            region="us-east-1",
            faults=faults,
        )
        return [
            (c["InferenceComponentName"], c["InferenceComponentStatus"])
            for c in answer["InferenceComponents"]
        ]

    existing = emulator.call(
        "sagemaker", "DescribeInferenceComponent", {"InferenceComponentName": old}, region="us-east-1"
    )
    emulator.call(
        "sagemaker",
        "CreateInferenceComponent",
        {
            "InferenceComponentName": "model-b",
            "EndpointName": deployed.endpoint,
            "VariantName": existing["VariantName"],
            "Specification": {
                "Container": {"Image": "example.com/llm:1", "ArtifactUrl": "s3://models/model-b.tar.gz"},
                "ComputeResourceRequirements": existing["Specification"]["ComputeResourceRequirements"],
            },
            "RuntimeConfig": {"CopyCount": 1},
        },
        region="us-east-1",
    )
    emulator.call(
        "sagemaker", "DeleteInferenceComponent", {"InferenceComponentName": old}, region="us-east-1"
    )
    clock.shift(timedelta(minutes=2))  # the old one is gone (1 min), the new one is still creating (3 min)

    assert listed([]) == [("model-b", "Creating")]
    assert listed(_stale(150)) == [(old, "InService")]  # as of 30 s before both calls
    described = emulator.call(
        "sagemaker",
        "DescribeInferenceComponent",
        {"InferenceComponentName": old},
        region="us-east-1",
        faults=_stale(90),
    )
    assert described["InferenceComponentStatus"] == "Deleting"  # deleted, still described
    with raises_aws("ValidationException", "Could not find inference component"):
        emulator.call(
            "sagemaker",
            "DescribeInferenceComponent",
            {"InferenceComponentName": "model-b"},
            region="us-east-1",
            faults=_stale(150),
        )


def test_after_delete_endpoint_a_stale_read_still_describes_and_lists_the_endpoint(
    emulator: Emulator, clock: time_machine.Traveller
) -> None:
    deployed = deploy_on_plan(emulator, clock, components=())
    emulator.call("sagemaker", "DeleteEndpoint", {"EndpointName": deployed.endpoint}, region="us-east-1")
    clock.shift(timedelta(minutes=3))  # deleted two minutes after DeleteEndpoint

    with raises_aws("ValidationException", "Could not find endpoint"):
        emulator.call(
            "sagemaker", "DescribeEndpoint", {"EndpointName": deployed.endpoint}, region="us-east-1"
        )
    stale = emulator.call(
        "sagemaker",
        "DescribeEndpoint",
        {"EndpointName": deployed.endpoint},
        region="us-east-1",
        faults=_stale(120),
    )
    assert stale["EndpointStatus"] == "Deleting"
    listed = emulator.call("sagemaker", "ListEndpoints", {}, region="us-east-1", faults=_stale(120))
    assert [e["EndpointName"] for e in listed["Endpoints"]] == [deployed.endpoint]
    # Writes are never stale: a stale_listing rule on every operation leaves DeleteEndpoint as it is.
    with raises_aws("ValidationException", "Could not find endpoint"):
        emulator.call(
            "sagemaker",
            "DeleteEndpoint",
            {"EndpointName": deployed.endpoint},
            region="us-east-1",
            faults=_stale(120),
        )


def test_a_stale_capacity_reservation_listing_misses_a_block_just_bought(
    emulator: Emulator, clock: time_machine.Traveller
) -> None:
    """EC2's Describe calls are eventually consistent (AWS_FACTS.md, "Payments, listings, limits"; issue 29
    point 1): for ``delay_seconds`` after ``PurchaseCapacityBlock`` a read neither lists the block nor finds
    it by id, and then it shows the state of then (``payment-pending``) for as long again."""
    offering = emulator.call(
        "ec2",
        "DescribeCapacityBlockOfferings",
        {"InstanceType": "p5.48xlarge", "InstanceCount": 1, "CapacityDurationHours": 24},
        region="us-east-1",
    )["CapacityBlockOfferings"][0]
    bought = emulator.call(
        "ec2",
        "PurchaseCapacityBlock",
        {
            "CapacityBlockOfferingId": offering["CapacityBlockOfferingId"],
            "InstancePlatform": "Linux/UNIX",
            "TagSpecifications": [
                {"ResourceType": "capacity-reservation", "Tags": [{"Key": "owner", "Value": "me"}]}
            ],
        },
        region="us-east-1",
    )["CapacityReservation"]["CapacityReservationId"]

    def listed(faults: list[FaultRule]) -> list[tuple[str, str]]:
        answer = emulator.call(
            "ec2",
            "DescribeCapacityReservations",
            {"Filters": [{"Name": "tag:owner", "Values": ["me"]}]},
            region="us-east-1",
            faults=faults,
        )
        return [(r["CapacityReservationId"], r["State"]) for r in answer["CapacityReservations"]]

    assert listed(_stale(120)) == []
    with raises_aws("InvalidCapacityReservationId.NotFound"):
        emulator.call(
            "ec2",
            "DescribeCapacityReservations",
            {"CapacityReservationIds": [bought]},
            region="us-east-1",
            faults=_stale(120),
        )
    assert listed([]) == [(bought, "payment-pending")]
    clock.shift(timedelta(minutes=6))  # paid after 5 minutes: a read a little stale still says pending
    assert listed(_stale(120)) == [(bought, "payment-pending")]
    assert listed([]) == [(bought, "scheduled")]
