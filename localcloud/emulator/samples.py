"""Sample requests for every emulated operation, for the shape-walk test.

Each sample is a valid request (botocore's parameter validation accepts it) that refers to what the
emulator holds at the time it is asked: the latest offering a search returned, the sample plan, endpoint
and component. Called in :data:`LIFECYCLE_ORDER`, with virtual time moved forward where AWS would make a
caller wait (plan start, endpoint and component creation, deletions), every call succeeds.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from localcloud.emulator.common import utcnow

if TYPE_CHECKING:
    from localcloud.emulator import Emulator

PLAN = "sample-plan"
MODEL = "sample-model"
CONFIG = "sample-config"
ENDPOINT = "sample-endpoint"
COMPONENT = "sample-ic"
VARIANT = "AllTraffic"
INSTANCE_TYPE = "ml.p5.48xlarge"
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.4.0"
RESOURCE_ID = f"inference-component/{COMPONENT}"
DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
POLICY = "sample-invocations-per-copy"

LIFECYCLE_ORDER: list[tuple[str, str]] = [
    ("sagemaker", "SearchTrainingPlanOfferings"),
    ("sagemaker", "CreateTrainingPlan"),
    ("sagemaker", "DescribeTrainingPlan"),
    ("sagemaker", "ListTrainingPlans"),
    ("sagemaker", "CreateModel"),
    ("sagemaker", "DescribeModel"),
    ("sagemaker", "CreateEndpointConfig"),
    ("sagemaker", "ExtendTrainingPlan"),
    ("sagemaker", "DescribeTrainingPlanExtensionHistory"),
    ("sagemaker", "DescribeEndpointConfig"),
    ("sagemaker", "ListEndpointConfigs"),
    ("sagemaker", "CreateEndpoint"),
    ("sagemaker", "DescribeEndpoint"),
    ("sagemaker", "ListEndpoints"),
    ("sagemaker", "CreateInferenceComponent"),
    ("sagemaker", "DescribeInferenceComponent"),
    ("sagemaker", "ListInferenceComponents"),
    ("sagemaker", "UpdateInferenceComponentRuntimeConfig"),
    ("sagemaker", "ListTags"),
    ("sagemaker-runtime", "InvokeEndpoint"),
    ("application-auto-scaling", "RegisterScalableTarget"),
    ("application-auto-scaling", "TagResource"),
    ("application-auto-scaling", "ListTagsForResource"),
    ("application-auto-scaling", "UntagResource"),
    ("application-auto-scaling", "DescribeScalableTargets"),
    ("application-auto-scaling", "PutScalingPolicy"),
    ("application-auto-scaling", "DescribeScalingPolicies"),
    ("application-auto-scaling", "DescribeScalingActivities"),
    ("application-auto-scaling", "DeleteScalingPolicy"),
    ("application-auto-scaling", "DeregisterScalableTarget"),
    ("ec2", "DescribeCapacityBlockOfferings"),
    ("ec2", "PurchaseCapacityBlock"),
    ("ec2", "DescribeCapacityReservations"),
    ("ec2", "DescribeCapacityBlockExtensionOfferings"),
    ("ec2", "PurchaseCapacityBlockExtension"),
    ("ec2", "DescribeCapacityBlockExtensionHistory"),
    ("ec2", "RunInstances"),
    ("ec2", "DescribeInstances"),
    ("ec2", "TerminateInstances"),
    ("sagemaker", "UpdateEndpoint"),
    ("sagemaker", "DeleteInferenceComponent"),
    ("sagemaker", "DeleteEndpoint"),
    ("sagemaker", "DeleteEndpointConfig"),
    ("sagemaker", "DeleteModel"),
]
"""Every emulated operation, in an order in which the samples build on one another."""


def _plan_arn(emulator: Emulator) -> str:
    plan = emulator.training_plans.get("us-east-1", PLAN)
    return plan.arn if plan else f"arn:aws:sagemaker:us-east-1:{emulator.ctx.account_id}:training-plan/{PLAN}"


def _extension_offering(emulator: Emulator) -> str:
    """An extension offering of the sample plan (searched now: the plan must be Active or Scheduled)."""
    found = emulator.call(
        "sagemaker",
        "SearchTrainingPlanOfferings",
        {"TrainingPlanArn": _plan_arn(emulator), "DurationHours": 24},
        region="us-east-1",
    )["TrainingPlanExtensionOfferings"]
    return str(found[0]["TrainingPlanExtensionOfferingId"]) if found else "tpeo-none"


def sample_request(emulator: Emulator, service: str, operation: str) -> dict[str, Any]:
    """A valid request for ``operation`` (region us-east-1) built from the emulator's current state.

    Raises:
        KeyError: an operation without a sample.
    """
    if (service, operation) == ("sagemaker", "ExtendTrainingPlan"):
        return {"TrainingPlanExtensionOfferingId": _extension_offering(emulator)}
    now = utcnow()
    latest_plan_offering = emulator.market.latest_offering("tpo-")
    latest_block_offering = emulator.market.latest_offering("cb-")
    reservations = list(emulator.capacity_blocks.reservations)
    instance_ids = list(emulator.instances.instances)
    aas = {"ServiceNamespace": "sagemaker", "ResourceId": RESOURCE_ID, "ScalableDimension": DIMENSION}
    targets = list(emulator.autoscaling.targets.values())
    target_arn = (
        targets[-1].arn
        if targets
        else "arn:aws:application-autoscaling:us-east-1:123456789012:scalable-target/none"
    )
    latest_extension = emulator.market.latest_offering("cbe-")
    samples: dict[tuple[str, str], dict[str, Any]] = {
        ("sagemaker", "SearchTrainingPlanOfferings"): {
            "InstanceType": INSTANCE_TYPE,
            "InstanceCount": 1,
            "StartTimeAfter": now,
            "DurationHours": 24,
            "TargetResources": ["endpoint"],
        },
        ("sagemaker", "CreateTrainingPlan"): {
            "TrainingPlanName": PLAN,
            "TrainingPlanOfferingId": latest_plan_offering.offering_id
            if latest_plan_offering
            else "tpo-none",
            "Tags": [{"Key": "capacity-orchestrator:request-id", "Value": "sample"}],
        },
        ("sagemaker", "DescribeTrainingPlan"): {"TrainingPlanName": PLAN},
        ("sagemaker", "ListTrainingPlans"): {
            "Filters": [{"Name": "Status", "Value": "Active"}],
            "MaxResults": 10,
        },
        ("sagemaker", "CreateModel"): {
            "ModelName": MODEL,
            "PrimaryContainer": {"Image": IMAGE, "ModelDataUrl": "s3://models/sample/model.tar.gz"},
            "ExecutionRoleArn": ROLE,
            "Tags": [{"Key": "capacity-orchestrator:request-id", "Value": "sample"}],
        },
        ("sagemaker", "DescribeModel"): {"ModelName": MODEL},
        ("sagemaker", "CreateEndpointConfig"): {
            "EndpointConfigName": CONFIG,
            "ExecutionRoleArn": ROLE,
            "ProductionVariants": [
                {
                    "VariantName": VARIANT,
                    "InstanceType": INSTANCE_TYPE,
                    "InitialInstanceCount": 1,
                    "CapacityReservationConfig": {
                        "MlReservationArn": _plan_arn(emulator),
                        "CapacityReservationPreference": "capacity-reservations-only",
                    },
                    "ManagedInstanceScaling": {
                        "Status": "ENABLED",
                        "MinInstanceCount": 0,
                        "MaxInstanceCount": 1,
                    },
                    "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
                }
            ],
        },
        ("sagemaker", "DescribeTrainingPlanExtensionHistory"): {"TrainingPlanArn": _plan_arn(emulator)},
        ("sagemaker", "DescribeEndpointConfig"): {"EndpointConfigName": CONFIG},
        ("sagemaker", "ListEndpointConfigs"): {"NameContains": "sample", "SortBy": "Name"},
        ("sagemaker", "CreateEndpoint"): {
            "EndpointName": ENDPOINT,
            "EndpointConfigName": CONFIG,
            "Tags": [{"Key": "capacity-orchestrator:request-id", "Value": "sample"}],
        },
        ("sagemaker", "DescribeEndpoint"): {"EndpointName": ENDPOINT},
        ("sagemaker", "ListEndpoints"): {"StatusEquals": "InService"},
        ("sagemaker", "CreateInferenceComponent"): {
            "InferenceComponentName": COMPONENT,
            "EndpointName": ENDPOINT,
            "VariantName": VARIANT,
            "Specification": {
                "Container": {"Image": IMAGE, "ArtifactUrl": "s3://models/sample/model.tar.gz"},
                "StartupParameters": {
                    "ModelDataDownloadTimeoutInSeconds": 300,
                    "ContainerStartupHealthCheckTimeoutInSeconds": 600,
                },
                "ComputeResourceRequirements": {
                    "NumberOfAcceleratorDevicesRequired": 2,
                    "NumberOfCpuCoresRequired": 8,
                    "MinMemoryRequiredInMb": 65536,
                },
            },
            "RuntimeConfig": {"CopyCount": 1},
            "Tags": [{"Key": "capacity-orchestrator:request-id", "Value": "sample"}],
        },
        ("sagemaker", "DescribeInferenceComponent"): {"InferenceComponentName": COMPONENT},
        ("sagemaker", "ListInferenceComponents"): {"EndpointNameEquals": ENDPOINT},
        ("sagemaker", "UpdateInferenceComponentRuntimeConfig"): {
            "InferenceComponentName": COMPONENT,
            "DesiredRuntimeConfig": {"CopyCount": 2},
        },
        ("sagemaker", "ListTags"): {
            "ResourceArn": f"arn:aws:sagemaker:us-east-1:{emulator.ctx.account_id}:endpoint/{ENDPOINT}"
        },
        ("sagemaker-runtime", "InvokeEndpoint"): {
            "EndpointName": ENDPOINT,
            "InferenceComponentName": COMPONENT,
            "Body": b'{"inputs": "Hello"}',
            "ContentType": "application/json",
        },
        ("application-auto-scaling", "RegisterScalableTarget"): {
            **aas,
            "MinCapacity": 0,
            "MaxCapacity": 4,
            "Tags": {"capacity-orchestrator:request-id": "sample"},
        },
        ("application-auto-scaling", "TagResource"): {"ResourceARN": target_arn, "Tags": {"team": "ml"}},
        ("application-auto-scaling", "ListTagsForResource"): {"ResourceARN": target_arn},
        ("application-auto-scaling", "UntagResource"): {"ResourceARN": target_arn, "TagKeys": ["team"]},
        ("application-auto-scaling", "DescribeScalableTargets"): {
            "ServiceNamespace": "sagemaker",
            "ResourceIds": [RESOURCE_ID],
        },
        ("application-auto-scaling", "PutScalingPolicy"): {
            **aas,
            "PolicyName": POLICY,
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": 10.0,
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
                },
                "ScaleInCooldown": 300,
                "ScaleOutCooldown": 300,
            },
        },
        ("application-auto-scaling", "DescribeScalingPolicies"): {"ServiceNamespace": "sagemaker"},
        ("application-auto-scaling", "DescribeScalingActivities"): {
            "ServiceNamespace": "sagemaker",
            "ResourceId": RESOURCE_ID,
        },
        ("application-auto-scaling", "DeleteScalingPolicy"): {**aas, "PolicyName": POLICY},
        ("application-auto-scaling", "DeregisterScalableTarget"): aas,
        ("ec2", "DescribeCapacityBlockOfferings"): {
            "InstanceType": "p5.48xlarge",
            "InstanceCount": 1,
            "CapacityDurationHours": 24,
            "EndDateRange": now + timedelta(days=50),  # the block bought can be extended (56 days ahead)
            "MaxResults": 5,
        },
        ("ec2", "PurchaseCapacityBlock"): {
            "CapacityBlockOfferingId": (
                latest_block_offering.offering_id if latest_block_offering else "cb-0000000000000000"
            ),
            "InstancePlatform": "Linux/UNIX",
            "TagSpecifications": [
                {"ResourceType": "capacity-reservation", "Tags": [{"Key": "request-id", "Value": "sample"}]}
            ],
        },
        ("ec2", "DescribeCapacityReservations"): {
            "CapacityReservationIds": reservations[-1:],
            "Filters": [{"Name": "tag:request-id", "Values": ["sample"]}],
        },
        ("ec2", "DescribeCapacityBlockExtensionOfferings"): {
            "CapacityReservationId": reservations[-1] if reservations else "cr-0000000000000000",
            "CapacityBlockExtensionDurationHours": 24,
        },
        ("ec2", "PurchaseCapacityBlockExtension"): {
            "CapacityBlockExtensionOfferingId": (
                latest_extension.offering_id if latest_extension else "cbe-0000000000000000"
            ),
            "CapacityReservationId": reservations[-1] if reservations else "cr-0000000000000000",
        },
        ("ec2", "DescribeCapacityBlockExtensionHistory"): {"CapacityReservationIds": reservations[-1:]},
        ("ec2", "RunInstances"): {
            "MinCount": 1,
            "MaxCount": 1,
            "InstanceType": "p5.48xlarge",
            "ImageId": "ami-0abcdef1234567890",
            "ClientToken": "sample-token",
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": [{"Key": "request-id", "Value": "sample"}]}
            ],
        },
        ("ec2", "DescribeInstances"): {
            "InstanceIds": instance_ids[-1:],
            "Filters": [{"Name": "tag:request-id", "Values": ["sample"]}],
        },
        ("ec2", "TerminateInstances"): {"InstanceIds": instance_ids[-1:] or ["i-0000000000000000"]},
        ("sagemaker", "UpdateEndpoint"): {"EndpointName": ENDPOINT, "EndpointConfigName": CONFIG},
        ("sagemaker", "DeleteInferenceComponent"): {"InferenceComponentName": COMPONENT},
        ("sagemaker", "DeleteEndpoint"): {"EndpointName": ENDPOINT},
        ("sagemaker", "DeleteEndpointConfig"): {"EndpointConfigName": CONFIG},
        ("sagemaker", "DeleteModel"): {"ModelName": MODEL},
    }
    return samples[(service, operation)]
