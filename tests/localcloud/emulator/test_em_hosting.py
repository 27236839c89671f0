"""SageMaker hosting on a training plan: endpoint configs, endpoints, inference components, packing and
InvokeEndpoint, with AWS's error codes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from moto.cloudwatch.models import MetricDatum, cloudwatch_backends

from localcloud.emulator import Emulator, MarketConfig
from localcloud.emulator.common import RecordingSink
from tests.localcloud.emulator.support import Call, Deployment, deploy_on_plan, raises_aws, run_clock

ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"


def variant(
    plan_arn: str | None,
    *,
    instance_type: str = "ml.p5.48xlarge",
    count: int = 1,
    name: str = "AllTraffic",
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"VariantName": name, "InstanceType": instance_type, "InitialInstanceCount": count}
    if plan_arn:
        spec["CapacityReservationConfig"] = {
            "MlReservationArn": plan_arn,
            "CapacityReservationPreference": "capacity-reservations-only",
        }
    spec.update(extra)
    return spec


def component(
    call: Call, name: str, endpoint: str, *, copies: int = 1, accelerators: float = 1, memory: int = 1024
) -> dict[str, Any]:
    return call(
        "sagemaker",
        "CreateInferenceComponent",
        InferenceComponentName=name,
        EndpointName=endpoint,
        VariantName="AllTraffic",
        RuntimeConfig={"CopyCount": copies},
        Specification={
            "Container": {"Image": "example.com/llm:1"},
            "ComputeResourceRequirements": {
                "NumberOfAcceleratorDevicesRequired": accelerators,
                "MinMemoryRequiredInMb": memory,
            },
        },
    )


def clock_now() -> datetime:
    return datetime.now(UTC)


def buy_plan(
    call: Call,
    clock: time_machine.Traveller,
    *,
    count: int = 2,
    target: str = "endpoint",
    name: str = "plan",
    activate: bool = True,
) -> str:
    offering = call(
        "sagemaker",
        "SearchTrainingPlanOfferings",
        InstanceType="ml.p5.48xlarge",
        InstanceCount=count,
        DurationHours=24,
        TargetResources=[target],
    )["TrainingPlanOfferings"][0]
    arn = str(
        call(
            "sagemaker",
            "CreateTrainingPlan",
            TrainingPlanName=name,
            TrainingPlanOfferingId=offering["TrainingPlanOfferingId"],
        )["TrainingPlanArn"]
    )
    if activate:
        clock.move_to(offering["ReservedCapacityOfferings"][0]["StartTime"] + timedelta(minutes=1))
    return arn


@pytest.fixture
def deployed(emulator: Emulator, clock: time_machine.Traveller) -> Deployment:
    """2 x ml.p5.48xlarge plan, endpoint with managed instance scaling 0..2, two components of 4 GPUs."""
    return deploy_on_plan(
        emulator,
        clock,
        count=2,
        components=("model-a", "model-b"),
        accelerators=4,
        min_instances=0,
        max_instances=2,
    )


def status(call: Call, endpoint: str) -> str:
    return str(call("sagemaker", "DescribeEndpoint", EndpointName=endpoint)["EndpointStatus"])


def copies(call: Call, name: str) -> tuple[int, int]:
    runtime = call("sagemaker", "DescribeInferenceComponent", InferenceComponentName=name)["RuntimeConfig"]
    return runtime["DesiredCopyCount"], runtime["CurrentCopyCount"]


def test_endpoint_lifecycle_creating_inservice_updating_deleting_gone(
    call: Call, clock: time_machine.Traveller
) -> None:
    plan = buy_plan(call, clock)
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c1",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[variant(plan)],
    )
    call("sagemaker", "CreateEndpoint", EndpointName="ep", EndpointConfigName="c1")
    assert status(call, "ep") == "Creating"
    clock.shift(timedelta(minutes=3, seconds=59))
    assert status(call, "ep") == "Creating"
    clock.shift(timedelta(seconds=1))
    described = call("sagemaker", "DescribeEndpoint", EndpointName="ep")
    assert described["EndpointStatus"] == "InService"
    assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 1
    assert described["ProductionVariants"][0]["CapacityReservationConfig"]["UsedByCurrentEndpoint"] == 1
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c2",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[variant(plan, count=2)],
    )
    call("sagemaker", "UpdateEndpoint", EndpointName="ep", EndpointConfigName="c2")
    described = call("sagemaker", "DescribeEndpoint", EndpointName="ep")
    assert described["EndpointStatus"] == "Updating"
    assert described["PendingDeploymentSummary"]["EndpointConfigName"] == "c2"
    clock.shift(timedelta(minutes=4))
    described = call("sagemaker", "DescribeEndpoint", EndpointName="ep")
    assert (described["EndpointStatus"], described["EndpointConfigName"]) == ("InService", "c2")
    call("sagemaker", "DeleteEndpoint", EndpointName="ep")
    assert status(call, "ep") == "Deleting"
    clock.shift(timedelta(minutes=2))
    with raises_aws("ValidationException", 'Could not find endpoint "ep"'):
        status(call, "ep")


def test_no_update_or_delete_while_creating_or_updating(call: Call, clock: time_machine.Traveller) -> None:
    plan = buy_plan(call, clock)
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c1",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[variant(plan)],
    )
    call("sagemaker", "CreateEndpoint", EndpointName="ep", EndpointConfigName="c1")
    with raises_aws("ValidationException", "Cannot update in-progress endpoint"):
        call("sagemaker", "UpdateEndpoint", EndpointName="ep", EndpointConfigName="c1")
    with raises_aws("ValidationException", "Cannot delete in-progress endpoint"):
        call("sagemaker", "DeleteEndpoint", EndpointName="ep")
    clock.shift(timedelta(minutes=5))
    call("sagemaker", "UpdateEndpoint", EndpointName="ep", EndpointConfigName="c1")
    with raises_aws("ValidationException", "Cannot delete in-progress endpoint"):
        call("sagemaker", "DeleteEndpoint", EndpointName="ep")


def test_endpoint_delete_is_blocked_while_it_has_inference_components(
    call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    with raises_aws("ValidationException", "still has 2 inference component(s) (model-a, model-b)"):
        call("sagemaker", "DeleteEndpoint", EndpointName=deployed.endpoint)
    for name in deployed.components:
        call("sagemaker", "DeleteInferenceComponent", InferenceComponentName=name)
    with raises_aws("ValidationException", "inference component"):
        call("sagemaker", "DeleteEndpoint", EndpointName=deployed.endpoint)  # still Deleting
    clock.shift(timedelta(minutes=1))
    assert (
        call("sagemaker", "ListInferenceComponents", EndpointNameEquals=deployed.endpoint)[
            "InferenceComponents"
        ]
        == []
    )
    assert call("sagemaker", "DeleteEndpoint", EndpointName=deployed.endpoint) == {}


def test_config_delete_is_accepted_while_an_endpoint_uses_it_and_the_endpoint_keeps_billing(
    call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    # SageMaker accepts it (DeleteEndpointConfig API reference): the endpoint runs on, and bills, until
    # it is deleted itself. (The local cloud used to refuse it, which AWS does not.)
    assert call("sagemaker", "DeleteEndpointConfig", EndpointConfigName=deployed.config) == {}
    with raises_aws("ValidationException", "Could not find endpoint configuration"):
        call("sagemaker", "DescribeEndpointConfig", EndpointConfigName=deployed.config)
    clock.shift(timedelta(minutes=10))
    described = call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)
    assert (described["EndpointStatus"], described["EndpointConfigName"]) == ("InService", deployed.config)
    assert described["ProductionVariants"][0]["CurrentInstanceCount"] >= 1
    # While an update to another config is under way, that config can be deleted too.
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="next",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[variant(deployed.plan_arn, count=2)],
    )
    call("sagemaker", "UpdateEndpoint", EndpointName=deployed.endpoint, EndpointConfigName="next")
    assert call("sagemaker", "DeleteEndpointConfig", EndpointConfigName="next") == {}
    clock.shift(timedelta(minutes=4))
    described = call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)
    assert described["EndpointStatus"] == "InService"


def test_the_plan_must_be_active_to_create_an_endpoint(call: Call, clock: time_machine.Traveller) -> None:
    plan = buy_plan(call, clock, activate=False)
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c1",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[variant(plan)],
    )
    with raises_aws("ValidationException", "Training plan plan is Pending"):
        call("sagemaker", "CreateEndpoint", EndpointName="ep", EndpointConfigName="c1")


def test_the_variant_instance_type_must_match_the_plan(call: Call, clock: time_machine.Traveller) -> None:
    plan = buy_plan(call, clock)
    with raises_aws("ValidationException", "does not match the instance type ml.p5.48xlarge"):
        call(
            "sagemaker",
            "CreateEndpointConfig",
            EndpointConfigName="c1",
            ExecutionRoleArn=ROLE,
            ProductionVariants=[variant(plan, instance_type="ml.p4d.24xlarge")],
        )


def test_one_plan_per_endpoint(call: Call, clock: time_machine.Traveller) -> None:
    first = buy_plan(call, clock, name="one", count=1)
    second = buy_plan(call, clock, name="two", count=1)
    with raises_aws("ValidationException", "exactly one training plan"):
        call(
            "sagemaker",
            "CreateEndpointConfig",
            EndpointConfigName="c1",
            ExecutionRoleArn=ROLE,
            ProductionVariants=[variant(first), variant(second, name="Other")],
        )


def test_a_plan_bought_for_training_cannot_host_an_endpoint(
    call: Call, clock: time_machine.Traveller
) -> None:
    plan = buy_plan(call, clock, target="training-job")
    with raises_aws("ValidationException", "target resource training-job"):
        call(
            "sagemaker",
            "CreateEndpointConfig",
            EndpointConfigName="c1",
            ExecutionRoleArn=ROLE,
            ProductionVariants=[variant(plan)],
        )


def test_instances_cannot_exceed_what_the_plan_has_available(
    call: Call, clock: time_machine.Traveller
) -> None:
    plan = buy_plan(call, clock, count=2)
    with raises_aws("ValidationException", "exceeds the 2 instances of training plan"):
        call(
            "sagemaker",
            "CreateEndpointConfig",
            EndpointConfigName="big",
            ExecutionRoleArn=ROLE,
            ProductionVariants=[variant(plan, count=4)],
        )
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c2",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[variant(plan, count=2)],
    )
    call("sagemaker", "CreateEndpoint", EndpointName="first", EndpointConfigName="c2")
    with raises_aws("ValidationException", "has 0 available"):
        call("sagemaker", "CreateEndpoint", EndpointName="second", EndpointConfigName="c2")


def test_min_instance_count_zero_is_rejected_only_in_configured_regions(call: Call) -> None:
    scaling = {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2}
    with raises_aws("ValidationException", "MinInstanceCount 0 is not supported in region ap-northeast-1"):
        call(
            "sagemaker",
            "CreateEndpointConfig",
            region="ap-northeast-1",
            EndpointConfigName="c1",
            ExecutionRoleArn=ROLE,
            ProductionVariants=[
                variant(None, instance_type="ml.g6.12xlarge", ManagedInstanceScaling=scaling)
            ],
        )
    response = call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c1",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[variant(None, instance_type="ml.g6.12xlarge", ManagedInstanceScaling=scaling)],
    )
    assert response["EndpointConfigArn"].endswith(":endpoint-config/c1")


def test_a_config_for_inference_components_needs_an_execution_role(call: Call) -> None:
    with raises_aws("ValidationException", "ExecutionRoleArn is required"):
        call(
            "sagemaker",
            "CreateEndpointConfig",
            EndpointConfigName="c1",
            ProductionVariants=[variant(None, instance_type="ml.g6.12xlarge")],
        )


def test_instance_types_outside_the_model_enum_are_rejected(call: Call) -> None:
    with raises_aws("ValidationException", "at 'productionVariants.1.member.instanceType' failed to satisfy"):
        call(
            "sagemaker",
            "CreateEndpointConfig",
            EndpointConfigName="c1",
            ExecutionRoleArn=ROLE,
            ProductionVariants=[variant(None, instance_type="ml.x9.huge")],
        )


def test_names_are_unique(call: Call) -> None:
    call("sagemaker", "CreateModel", ModelName="m", PrimaryContainer={"Image": "i"}, ExecutionRoleArn=ROLE)
    with raises_aws("ValidationException", "Cannot create already existing model"):
        call(
            "sagemaker", "CreateModel", ModelName="m", PrimaryContainer={"Image": "i"}, ExecutionRoleArn=ROLE
        )
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c",
        ProductionVariants=[variant(None, instance_type="ml.g6.12xlarge", ModelName="m")],
    )
    with raises_aws("ValidationException", "Cannot create already existing endpoint configuration"):
        call(
            "sagemaker",
            "CreateEndpointConfig",
            EndpointConfigName="c",
            ProductionVariants=[variant(None, instance_type="ml.g6.12xlarge", ModelName="m")],
        )
    with raises_aws(
        "ValidationException", 'Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/x"'
    ):
        call("sagemaker", "DescribeModel", ModelName="x")


def test_inference_components_need_a_variant_without_model_name(
    call: Call, clock: time_machine.Traveller
) -> None:
    plan = buy_plan(call, clock)
    call("sagemaker", "CreateModel", ModelName="m", PrimaryContainer={"Image": "i"}, ExecutionRoleArn=ROLE)
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c1",
        ProductionVariants=[variant(plan, ModelName="m")],
    )
    call("sagemaker", "CreateEndpoint", EndpointName="ep", EndpointConfigName="c1")
    clock.shift(timedelta(minutes=5))
    with raises_aws("ValidationException", "Inference Components are not supported in this Endpoint"):
        component(call, "ic", "ep")


def test_copy_count_must_be_at_least_one_at_creation(call: Call, deployed: Deployment) -> None:
    with raises_aws("ValidationException", "it must be at least 1"):
        component(call, "zero", deployed.endpoint, copies=0)


def test_components_need_an_endpoint_in_service(call: Call, clock: time_machine.Traveller) -> None:
    plan = buy_plan(call, clock)
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c1",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[variant(plan)],
    )
    call("sagemaker", "CreateEndpoint", EndpointName="ep", EndpointConfigName="c1")
    with raises_aws("ValidationException", 'Endpoint "ep" is Creating'):
        component(call, "ic", "ep")


def test_a_copy_must_fit_on_one_instance(call: Call, deployed: Deployment) -> None:
    with raises_aws("ValidationException", "exceed one ml.p5.48xlarge instance (8 accelerators"):
        component(call, "huge", deployed.endpoint, accelerators=9)


def test_current_copies_follow_desired_and_instances_follow_copies(
    call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    # Two components of 4 GPUs each fill one 8-GPU instance.
    assert copies(call, "model-a") == (1, 1)
    endpoint = call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)
    assert endpoint["ProductionVariants"][0]["CurrentInstanceCount"] == 1
    call(
        "sagemaker",
        "UpdateInferenceComponentRuntimeConfig",
        InferenceComponentName="model-a",
        DesiredRuntimeConfig={"CopyCount": 3},
    )
    described = call("sagemaker", "DescribeInferenceComponent", InferenceComponentName="model-a")
    assert described["InferenceComponentStatus"] == "Updating"
    assert copies(call, "model-a") == (3, 1)
    clock.shift(timedelta(minutes=2))
    # 4 copies x 4 GPUs need 2 instances: the plan has exactly 2, so model-a gets 3 and model-b keeps 1.
    assert copies(call, "model-a") == (3, 3)
    assert copies(call, "model-b") == (1, 1)
    endpoint = call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)
    assert endpoint["ProductionVariants"][0]["CurrentInstanceCount"] == 2
    call(
        "sagemaker",
        "UpdateInferenceComponentRuntimeConfig",
        InferenceComponentName="model-a",
        DesiredRuntimeConfig={"CopyCount": 5},
    )
    clock.shift(timedelta(minutes=2))
    assert copies(call, "model-a") == (5, 3)  # no room on the plan's 2 instances for more
    plan = call("sagemaker", "DescribeTrainingPlan", TrainingPlanName=deployed.plan_arn)
    assert (plan["InUseInstanceCount"], plan["AvailableInstanceCount"]) == (2, 0)


def test_scaling_every_component_to_zero_releases_the_instances(
    call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    for name in deployed.components:
        call(
            "sagemaker",
            "UpdateInferenceComponentRuntimeConfig",
            InferenceComponentName=name,
            DesiredRuntimeConfig={"CopyCount": 0},
        )
    clock.shift(timedelta(minutes=1))
    assert copies(call, "model-a") == (0, 0)
    endpoint = call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)
    assert endpoint["ProductionVariants"][0]["CurrentInstanceCount"] == 0  # MinInstanceCount 0


def metric_values(name: str, dimensions: dict[str, str]) -> list[float]:
    backend = cloudwatch_backends["123456789012"]["us-east-1"]
    return [
        datum.value
        for datum in backend.metric_data
        if isinstance(datum, MetricDatum)
        and datum.namespace == "AWS/SageMaker"
        and datum.name == name
        and {dimension.name: dimension.value for dimension in datum.dimensions} == dimensions
    ]


def invoke(call: Call, endpoint: str, component_name: str | None = "model-a") -> dict[str, Any]:
    params: dict[str, Any] = {
        "EndpointName": endpoint,
        "Body": b'{"inputs": "hi"}',
        "ContentType": "application/json",
    }
    if component_name:
        params["InferenceComponentName"] = component_name
    return call("sagemaker-runtime", "InvokeEndpoint", **params)


def test_invocations_are_counted_in_cloudwatch(call: Call, deployed: Deployment) -> None:
    reply = invoke(call, deployed.endpoint)
    assert b'"inference_component": "model-a"' in reply["Body"]
    assert reply["InvokedProductionVariant"] == "AllTraffic"
    invoke(call, deployed.endpoint)
    assert metric_values("Invocations", {"InferenceComponentName": "model-a"}) == [1.0, 1.0]
    assert metric_values("Invocations", {"EndpointName": deployed.endpoint, "VariantName": "AllTraffic"}) == [
        1.0,
        1.0,
    ]
    assert metric_values("InvocationsPerCopy", {"InferenceComponentName": "model-a"}) == [1.0, 1.0]


def test_invoking_a_component_with_no_copies_fails_and_counts_no_capacity(
    call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    call(
        "sagemaker",
        "UpdateInferenceComponentRuntimeConfig",
        InferenceComponentName="model-a",
        DesiredRuntimeConfig={"CopyCount": 0},
    )
    invoke(call, deployed.endpoint)  # the copy is still there for the minute it takes to go
    clock.shift(timedelta(minutes=1))
    with raises_aws("ValidationError", "Inference Component has no capacity to process this request"):
        invoke(call, deployed.endpoint)
    assert metric_values("NoCapacityInvocationFailures", {"InferenceComponentName": "model-a"}) == [1.0]


def test_after_the_plan_expires_invocations_fail_for_lack_of_capacity(
    call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    clock.move_to(deployed.plan_end)
    with raises_aws("ValidationError", "no capacity"):
        invoke(call, deployed.endpoint)
    endpoint = call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)
    assert endpoint["ProductionVariants"][0]["CurrentInstanceCount"] == 0


def test_an_inference_component_endpoint_needs_the_component_name(call: Call, deployed: Deployment) -> None:
    with raises_aws("ValidationError", "Inference Component Name header is required"):
        invoke(call, deployed.endpoint, None)
    with raises_aws("ValidationError", "Endpoint nope of account 123456789012 not found"):
        invoke(call, "nope")


def test_on_demand_endpoints_are_limited_by_the_endpoint_quota(
    aws: None, clock: time_machine.Traveller
) -> None:
    emulator = Emulator(events=RecordingSink(), market=MarketConfig(endpoint_quotas={"*/ml.g6.12xlarge": 2}))
    emulator.call(
        "sagemaker",
        "CreateEndpointConfig",
        {
            "EndpointConfigName": "c",
            "ExecutionRoleArn": ROLE,
            "ProductionVariants": [variant(None, instance_type="ml.g6.12xlarge", count=3)],
        },
        region="us-east-1",
    )
    with raises_aws("ResourceLimitExceeded", "'ml.g6.12xlarge for endpoint usage' is 2 Instances"):
        emulator.call(
            "sagemaker",
            "CreateEndpoint",
            {"EndpointName": "e", "EndpointConfigName": "c"},
            region="us-east-1",
        )


def test_tags_are_listed_and_billable_resources_reported(
    emulator: Emulator, call: Call, deployed: Deployment
) -> None:
    endpoint_arn = call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)["EndpointArn"]
    call(
        "sagemaker",
        "CreateModel",
        ModelName="tagged",
        PrimaryContainer={"Image": "i"},
        ExecutionRoleArn=ROLE,
        Tags=[{"Key": "request", "Value": "r-1"}],
    )
    assert call("sagemaker", "ListTags", ResourceArn="arn:aws:sagemaker:us-east-1:123456789012:model/tagged")[
        "Tags"
    ] == [{"Key": "request", "Value": "r-1"}]
    assert call("sagemaker", "ListTags", ResourceArn=endpoint_arn)["Tags"] == []
    kinds = sorted((item.resource_type, item.name) for item in emulator.billable_resources())
    assert kinds == [
        ("endpoint", deployed.endpoint),
        ("endpoint-config", deployed.config),
        ("inference-component", "model-a"),
        ("inference-component", "model-b"),
    ]
    assert emulator.billable_resources("us-west-2") == []


def test_endpoint_state_changes_are_sent_as_aws_events(
    emulator: Emulator, call: Call, sink: RecordingSink, clock: time_machine.Traveller
) -> None:
    plan = buy_plan(call, clock)
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c1",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[variant(plan)],
    )
    created = clock_now()
    call(
        "sagemaker",
        "CreateEndpoint",
        EndpointName="ep",
        EndpointConfigName="c1",
        Tags=[{"Key": "k", "Value": "v"}],
    )
    due = emulator.hosting.next_due(created)
    assert due is not None
    assert due.foreground
    run_clock(emulator, clock, created, created + timedelta(minutes=10))
    call("sagemaker", "DeleteEndpoint", EndpointName="ep")
    run_clock(emulator, clock, clock_now(), clock_now() + timedelta(minutes=10))
    events = sink.of_type("SageMaker Endpoint State Change")
    assert [event["detail"]["EndpointStatus"] for event in events] == ["CREATING", "IN_SERVICE", "DELETING"]
    in_service = events[1]
    assert in_service["source"] == "aws.sagemaker"
    assert in_service["resources"] == ["arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep"]
    assert in_service["detail"]["EndpointConfigName"] == "c1"
    assert in_service["detail"]["Tags"] == {"k": "v"}
    assert in_service["detail"]["LastModifiedTime"] == (created + timedelta(minutes=4)).timestamp() * 1000
    assert in_service["detail"]["ProductionVariants"] == [{"DesiredWeight": 1.0, "DesiredInstanceCount": 1.0}]


def test_a_model_endpoint_on_an_expired_plan_has_no_capacity(
    call: Call, clock: time_machine.Traveller
) -> None:
    plan = buy_plan(call, clock)
    call("sagemaker", "CreateModel", ModelName="m", PrimaryContainer={"Image": "i"}, ExecutionRoleArn=ROLE)
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c1",
        ProductionVariants=[variant(plan, ModelName="m")],
    )
    call("sagemaker", "CreateEndpoint", EndpointName="ep", EndpointConfigName="c1")
    clock.shift(timedelta(minutes=5))
    assert invoke(call, "ep", None)["InvokedProductionVariant"] == "AllTraffic"
    clock.shift(timedelta(days=1))
    with raises_aws("ValidationError", "has no capacity to process this request"):
        invoke(call, "ep", None)


def test_a_component_cannot_be_deleted_while_it_is_creating_or_updating(
    call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    # Given a component just created (Creating for 3 minutes)
    component(call, "model-c", deployed.endpoint, accelerators=1)
    # When it is deleted now, then AWS refuses (issue 29: a component stuck Creating cannot be deleted)
    with raises_aws("ValidationException", "while it is Creating"):
        call("sagemaker", "DeleteInferenceComponent", InferenceComponentName="model-c")
    clock.shift(timedelta(minutes=3))
    # And while a copy change is under way (Updating) it is refused too (the less kind choice)
    call(
        "sagemaker",
        "UpdateInferenceComponentRuntimeConfig",
        InferenceComponentName="model-c",
        DesiredRuntimeConfig={"CopyCount": 2},
    )
    with raises_aws("ValidationException", "while it is Updating"):
        call("sagemaker", "DeleteInferenceComponent", InferenceComponentName="model-c")
    clock.shift(timedelta(minutes=2))
    # Once InService it is deleted (Deleting, and a repeat is a no-op)
    call("sagemaker", "DeleteInferenceComponent", InferenceComponentName="model-c")
    call("sagemaker", "DeleteInferenceComponent", InferenceComponentName="model-c")
    described = call("sagemaker", "DescribeInferenceComponent", InferenceComponentName="model-c")
    assert described["InferenceComponentStatus"] == "Deleting"
