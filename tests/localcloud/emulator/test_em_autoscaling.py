"""Application Auto Scaling on inference components: rules, step scaling from zero, target tracking out
and in, cooldowns, and no steps when idle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
import time_machine

from localcloud.contracts import AwsError
from localcloud.emulator import Emulator
from tests.localcloud.emulator.support import Call, Deployment, deploy_on_plan, raises_aws, run_clock

IC = {
    "ServiceNamespace": "sagemaker",
    "ResourceId": "inference-component/model-a",
    "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
}


@pytest.fixture
def deployed(emulator: Emulator, clock: time_machine.Traveller) -> Deployment:
    """One ml.p5.48xlarge, a component of 1 GPU (up to 8 copies fit)."""
    return deploy_on_plan(emulator, clock, min_instances=0)


def copies(call: Call) -> tuple[int, int]:
    runtime = call("sagemaker", "DescribeInferenceComponent", InferenceComponentName="model-a")[
        "RuntimeConfig"
    ]
    return runtime["DesiredCopyCount"], runtime["CurrentCopyCount"]


def invoke(call: Call, endpoint: str, times: int = 1) -> int:
    served = 0
    for _ in range(times):
        try:
            call(
                "sagemaker-runtime",
                "InvokeEndpoint",
                EndpointName=endpoint,
                InferenceComponentName="model-a",
                Body=b"{}",
            )
            served += 1
        except AwsError:
            pass
    return served


def advance(emulator: Emulator, clock: time_machine.Traveller, delta: timedelta) -> int:
    now = datetime.now(UTC)
    return run_clock(emulator, clock, now, now + delta)


def test_register_rules(call: Call, deployed: Deployment) -> None:
    with raises_aws("ValidationException", "MinCapacity and MaxCapacity are required"):
        call("application-auto-scaling", "RegisterScalableTarget", **IC)
    with raises_aws(
        "ValidationException", "Minimum capacity (3) cannot be greater than maximum capacity (2)"
    ):
        call("application-auto-scaling", "RegisterScalableTarget", **IC, MinCapacity=3, MaxCapacity=2)
    with raises_aws("ValidationException", "The inference component nope does not exist"):
        call(
            "application-auto-scaling",
            "RegisterScalableTarget",
            **{**IC, "ResourceId": "inference-component/nope"},
            MinCapacity=0,
            MaxCapacity=2,
        )
    with raises_aws("ValidationException", "Unsupported service namespace ecs"):
        call(
            "application-auto-scaling",
            "RegisterScalableTarget",
            **{**IC, "ServiceNamespace": "ecs"},
            MinCapacity=0,
            MaxCapacity=2,
        )
    with raises_aws("ObjectNotFoundException", "No scalable target registered"):
        call("application-auto-scaling", "DeregisterScalableTarget", **IC)
    with raises_aws("ObjectNotFoundException", "No scalable target registered"):
        call(
            "application-auto-scaling",
            "PutScalingPolicy",
            **IC,
            PolicyName="p",
            PolicyType="StepScaling",
            StepScalingPolicyConfiguration={
                "AdjustmentType": "ChangeInCapacity",
                "StepAdjustments": [{"ScalingAdjustment": 1}],
            },
        )
    call("application-auto-scaling", "RegisterScalableTarget", **IC, MinCapacity=0, MaxCapacity=2)
    with raises_aws("ValidationException", "SageMakerVariantInvocationsPerInstance is not valid"):
        call(
            "application-auto-scaling",
            "PutScalingPolicy",
            **IC,
            PolicyName="p",
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 5.0,
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
                },
            },
        )


def test_min_capacity_zero_is_a_value_and_registration_clamps(
    call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    call("application-auto-scaling", "RegisterScalableTarget", **IC, MinCapacity=0, MaxCapacity=3)
    target = call("application-auto-scaling", "DescribeScalableTargets", ServiceNamespace="sagemaker")[
        "ScalableTargets"
    ][0]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 3)
    assert copies(call) == (1, 1)  # 1 is inside [0, 3]: untouched
    call("application-auto-scaling", "RegisterScalableTarget", **IC, MinCapacity=2)
    assert copies(call)[0] == 2
    clock.shift(timedelta(minutes=2))
    assert copies(call) == (2, 2)
    activity = call("application-auto-scaling", "DescribeScalingActivities", ServiceNamespace="sagemaker")[
        "ScalingActivities"
    ][0]
    assert activity["StatusCode"] == "Successful"
    assert activity["Description"] == "Setting desired copy count to 2."


def put_step_policy(call: Call) -> str:
    call("application-auto-scaling", "RegisterScalableTarget", **IC, MinCapacity=0, MaxCapacity=2)
    arn = str(
        call(
            "application-auto-scaling",
            "PutScalingPolicy",
            **IC,
            PolicyName="from-zero",
            PolicyType="StepScaling",
            StepScalingPolicyConfiguration={
                "AdjustmentType": "ChangeInCapacity",
                "MetricAggregationType": "Maximum",
                # The alarm re-evaluates its last datapoint for a while after the metric stopped ("How
                # alarm state is evaluated when data is missing", CloudWatch user guide) and stays in
                # ALARM: the default cooldown keeps that from adding a second copy.
                "Cooldown": 300,
                "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
            },
        )["PolicyARN"]
    )
    boto3.client("cloudwatch", region_name="us-east-1").put_metric_alarm(
        AlarmName="model-a-from-zero",
        Namespace="AWS/SageMaker",
        MetricName="NoCapacityInvocationFailures",
        Dimensions=[{"Name": "InferenceComponentName", "Value": "model-a"}],
        Statistic="Maximum",
        Period=60,
        EvaluationPeriods=1,
        DatapointsToAlarm=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        TreatMissingData="missing",
        AlarmActions=[arn],
    )
    return arn


def test_step_scaling_brings_a_component_back_from_zero(
    emulator: Emulator, call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    put_step_policy(call)
    call(
        "sagemaker",
        "UpdateInferenceComponentRuntimeConfig",
        InferenceComponentName="model-a",
        DesiredRuntimeConfig={"CopyCount": 0},
    )
    advance(emulator, clock, timedelta(minutes=2))
    assert copies(call) == (0, 0)
    endpoint = call("sagemaker", "DescribeEndpoint", EndpointName=deployed.endpoint)
    assert endpoint["ProductionVariants"][0]["CurrentInstanceCount"] == 0
    assert invoke(call, deployed.endpoint) == 0  # fails, counts NoCapacityInvocationFailures
    advance(emulator, clock, timedelta(minutes=2))  # alarm at the next minute, action a minute later
    assert copies(call)[0] == 1
    advance(emulator, clock, timedelta(minutes=2))
    assert copies(call) == (1, 1)
    assert invoke(call, deployed.endpoint) == 1
    activities = call(
        "application-auto-scaling",
        "DescribeScalingActivities",
        ServiceNamespace="sagemaker",
        ResourceId="inference-component/model-a",
    )["ScalingActivities"]
    assert (
        activities[0]["Cause"] == "monitor alarm model-a-from-zero in state ALARM triggered policy from-zero"
    )
    assert activities[0]["StatusMessage"].startswith("Successfully set desired copy count to 1.")


def put_target_tracking(call: Call, *, low: int, high: int, target: float = 5.0) -> dict[str, Any]:
    call("application-auto-scaling", "RegisterScalableTarget", **IC, MinCapacity=low, MaxCapacity=high)
    return call(
        "application-auto-scaling",
        "PutScalingPolicy",
        **IC,
        PolicyName="per-copy",
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": target,
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
            },
            "ScaleOutCooldown": 300,
            "ScaleInCooldown": 300,
        },
    )


def test_target_tracking_creates_its_alarms_and_scales_out_on_load(
    emulator: Emulator, call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    policy = put_target_tracking(call, low=1, high=4)
    names = [alarm["AlarmName"] for alarm in policy["Alarms"]]
    assert [name.split("-")[:5] for name in names] == [
        ["TargetTracking", "inference", "component/model", "a", "AlarmHigh"],
        ["TargetTracking", "inference", "component/model", "a", "AlarmLow"],
    ]
    alarms = boto3.client("cloudwatch", region_name="us-east-1").describe_alarms(AlarmNames=names)[
        "MetricAlarms"
    ]
    assert {alarm["MetricName"] for alarm in alarms} == {"InvocationsPerCopy"}
    for _minute in range(4):  # 20 invocations a minute on 1 copy: 4x the target of 5
        assert invoke(call, deployed.endpoint, 20) == 20
        advance(emulator, clock, timedelta(minutes=1))
    advance(emulator, clock, timedelta(minutes=1))
    assert copies(call)[0] == 4  # ceil(1 * 20 / 5), within MaxCapacity 4


def test_target_tracking_honours_the_scale_out_cooldown(
    emulator: Emulator, call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    put_target_tracking(call, low=1, high=8)
    desired = []
    for _minute in range(9):  # 12 invocations a minute per current copy keeps the metric above the target
        invoke(call, deployed.endpoint, 12 * max(1, copies(call)[1]))
        advance(emulator, clock, timedelta(minutes=1))
        desired.append(copies(call)[0])
    first_change = next(index for index, value in enumerate(desired) if value > 1)
    # After a scale-out, the next one waits for ScaleOutCooldown (300 s).
    assert desired[first_change : first_change + 4] == [desired[first_change]] * 4


def test_target_tracking_does_not_scale_an_idle_component_in_nor_out_from_zero(
    emulator: Emulator, call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    """No datapoints is insufficient data, not low utilization: "A target tracking scaling policy does not
    perform scaling when the specified metric has insufficient data. It does not perform scale in because it
    does not interpret insufficient data as low utilization" (Application Auto Scaling target tracking, ECS
    developer guide). Nor does it scale out from zero (AWS_FACTS.md "Scaling inference components")."""
    policy = put_target_tracking(call, low=0, high=4)
    advance(emulator, clock, timedelta(minutes=20))
    assert copies(call) == (1, 1)
    alarms = boto3.client("cloudwatch", region_name="us-east-1").describe_alarms(
        AlarmNames=[alarm["AlarmName"] for alarm in policy["Alarms"]]
    )["MetricAlarms"]
    assert {(alarm["TreatMissingData"], alarm["StateValue"]) for alarm in alarms} == {
        ("missing", "INSUFFICIENT_DATA")
    }
    call(
        "sagemaker",
        "UpdateInferenceComponentRuntimeConfig",
        InferenceComponentName="model-a",
        DesiredRuntimeConfig={"CopyCount": 0},
    )
    advance(emulator, clock, timedelta(minutes=2))
    assert invoke(call, deployed.endpoint, 50) == 0
    advance(emulator, clock, timedelta(minutes=10))
    assert copies(call) == (0, 0)


def test_low_traffic_scales_in_after_15_low_minutes_to_at_least_one_copy(
    emulator: Emulator, call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    """AlarmLow needs 15 real datapoints below 90% of the target (AWS_FACTS.md); the new capacity is
    ``ceil(current * metric / target)``, at least 1 while the metric is above 0."""
    put_target_tracking(call, low=0, high=4)
    call(
        "sagemaker",
        "UpdateInferenceComponentRuntimeConfig",
        InferenceComponentName="model-a",
        DesiredRuntimeConfig={"CopyCount": 3},
    )
    advance(emulator, clock, timedelta(minutes=5))
    assert copies(call) == (3, 3)
    seen = []
    for _minute in range(18):  # 3 invocations a minute on 3 copies: 1 per copy, target 5
        invoke(call, deployed.endpoint, 3)
        advance(emulator, clock, timedelta(minutes=1))
        seen.append(copies(call)[0])
    assert seen[:14] == [3] * 14  # 14 low minutes are not 15
    assert seen[-1] == 1  # ceil(3 * 1 / 5)


def test_idle_costs_no_steps_once_settled(
    emulator: Emulator, call: Call, deployed: Deployment, clock: time_machine.Traveller
) -> None:
    put_target_tracking(call, low=0, high=4)
    put_step_policy(call)
    advance(emulator, clock, timedelta(minutes=30))
    assert copies(call) == (1, 1)
    now = datetime.now(UTC)
    assert emulator.autoscaling.next_due(now) is None
    assert emulator.alarms.next_due(now) is None
    assert advance(emulator, clock, timedelta(days=14)) == 0


def test_deleting_policies_and_targets_removes_their_alarms(
    emulator: Emulator, call: Call, deployed: Deployment
) -> None:
    policy = put_target_tracking(call, low=1, high=2)
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    names = [alarm["AlarmName"] for alarm in policy["Alarms"]]
    assert len(cloudwatch.describe_alarms(AlarmNames=names)["MetricAlarms"]) == 2
    assert {item.resource_type for item in emulator.billable_resources()} >= {
        "scalable-target",
        "scaling-policy",
    }
    call("application-auto-scaling", "DeregisterScalableTarget", **IC)
    assert cloudwatch.describe_alarms(AlarmNames=names)["MetricAlarms"] == []
    assert (
        call("application-auto-scaling", "DescribeScalingPolicies", ServiceNamespace="sagemaker")[
            "ScalingPolicies"
        ]
        == []
    )
    with raises_aws("ObjectNotFoundException", "policy name: per-copy"):
        call("application-auto-scaling", "DeleteScalingPolicy", **IC, PolicyName="per-copy")


def test_variant_instance_count_is_a_scalable_dimension(call: Call, clock: time_machine.Traveller) -> None:
    call(
        "sagemaker",
        "CreateModel",
        ModelName="m",
        PrimaryContainer={"Image": "i"},
        ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
    )
    call(
        "sagemaker",
        "CreateEndpointConfig",
        EndpointConfigName="c",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "m",
                "InstanceType": "ml.g6.12xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    call("sagemaker", "CreateEndpoint", EndpointName="ep", EndpointConfigName="c")
    clock.shift(timedelta(minutes=5))
    variant = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/ep/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    }
    call("application-auto-scaling", "RegisterScalableTarget", **variant, MinCapacity=2, MaxCapacity=4)
    described = call("sagemaker", "DescribeEndpoint", EndpointName="ep")["ProductionVariants"][0]
    assert (described["CurrentInstanceCount"], described["DesiredInstanceCount"]) == (2, 2)
    with raises_aws("ValidationException", "expected endpoint/<name>/variant/<variant>"):
        call(
            "application-auto-scaling",
            "RegisterScalableTarget",
            **{**variant, "ResourceId": "endpoint/ep"},
            MinCapacity=1,
            MaxCapacity=2,
        )
