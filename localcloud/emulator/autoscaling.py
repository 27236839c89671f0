"""Application Auto Scaling for the ``sagemaker`` namespace: ``RegisterScalableTarget``,
``DeregisterScalableTarget``, ``DescribeScalableTargets``, ``PutScalingPolicy``, ``DeleteScalingPolicy``,
``DescribeScalingPolicies``, ``DescribeScalingActivities``, and the tags of scalable targets
(``Tags`` on the first ``RegisterScalableTarget``, ``TagResource``, ``UntagResource``,
``ListTagsForResource``) (Application Auto Scaling API reference and
user guide; "Automatic scaling of Amazon SageMaker AI models").

Kept whole for now: one service object (targets, policies, activities, target tracking) over one store.

Dimensions: ``sagemaker:inference-component:DesiredCopyCount`` (``ResourceId``
``inference-component/<name>``) and ``sagemaker:variant:DesiredInstanceCount`` (``endpoint/<name>/variant/
<variant>``). ``MinCapacity`` 0 is a value, not "unset".

How policies act (a :class:`~localcloud.contracts.Ticker`, background work):

* Step scaling: a CloudWatch alarm whose ``AlarmActions`` name the policy ARN is in ``ALARM``; the policy
  picks the step whose interval holds (metric - threshold), the metric being the alarm's evaluated
  datapoints aggregated by ``MetricAggregationType`` (default Average), and applies ``ChangeInCapacity``,
  ``PercentChangeInCapacity`` or ``ExactCapacity``.
* Target tracking: ``PutScalingPolicy`` creates the two alarms AWS creates, in moto
  (``TargetTracking-<resource>-AlarmHigh-<uuid>``: 3 of 3 one-minute datapoints above the target;
  ``...-AlarmLow-<uuid>``: 15 of 15 below 90% of it), both with ``TreatMissingData`` ``missing``. In
  ``ALARM`` they set the capacity to ``ceil(current * metric / target)``, the metric being the latest
  evaluated datapoint; from 0 that is 0, so target tracking never scales out from zero (as on AWS). The
  emulated SageMaker publishes ``InvocationsPerCopy`` only in minutes with invocations (no zeros): an idle
  component's alarms go ``INSUFFICIENT_DATA`` and target tracking does not scale it in ("A target tracking
  scaling policy does not perform scaling when the specified metric has insufficient data. It does not
  perform scale in because it does not interpret insufficient data as low utilization", Application Auto
  Scaling / ECS user guides); low but non-zero traffic scales in to at least one copy. Zero copies come from
  the application's own alarm (DESIGN.md section 4). Predefined metrics:
  ``SageMakerInferenceComponentInvocationsPerCopy`` (``InvocationsPerCopy``, Sum) and
  ``SageMakerVariantInvocationsPerInstance`` (``InvocationsPerInstance``, Sum); the high-resolution
  concurrency metrics are accepted but not published by the emulator (their alarms stay
  ``INSUFFICIENT_DATA``).
* An action happens ``Timings.autoscaling_reaction`` after the alarm entered ``ALARM`` and then once per
  that interval while it stays there, only when it would change the capacity (the new capacity is clamped
  to [MinCapacity, MaxCapacity]), and never within the cooldown (step ``Cooldown``; target tracking
  ``ScaleOutCooldown``/``ScaleInCooldown``, default 300 s; no scale-in during a scale-out cooldown).
  ``next_due`` returns None when no alarm in ``ALARM`` would change anything: idle costs no steps.

Errors: ``ValidationException`` (unsupported namespace or dimension, unknown resource, Min > Max, missing
configuration) and ``ObjectNotFoundException`` (target or policy not registered).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from localcloud.contracts import AwsError, Due
from localcloud.emulator import cloudwatch
from localcloud.emulator.alarms import AlarmEvaluator
from localcloud.emulator.common import (
    Context,
    Handler,
    Params,
    Response,
    as_utc,
    paginate,
    utcnow,
    validation,
)
from localcloud.emulator.hosting import Hosting
from localcloud.faults import FaultKind

IC_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
VARIANT_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
DEFAULT_COOLDOWN = 300
_PREDEFINED: dict[str, tuple[str, str, str, int]] = {
    # predefined type -> (dimension, metric name, statistic, period seconds)
    "SageMakerInferenceComponentInvocationsPerCopy": (IC_DIMENSION, "InvocationsPerCopy", "Sum", 60),
    "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution": (
        IC_DIMENSION,
        "ConcurrentRequestsPerCopy",
        "Average",
        10,
    ),
    "SageMakerVariantInvocationsPerInstance": (VARIANT_DIMENSION, "InvocationsPerInstance", "Sum", 60),
    "SageMakerVariantConcurrentRequestsPerModelHighResolution": (
        VARIANT_DIMENSION,
        "ConcurrentRequestsPerModel",
        "Average",
        10,
    ),
}

TargetKey = tuple[str, str, str, str]
"""(region, service namespace, resource id, scalable dimension)."""


def _aggregate(config: dict[str, Any], values: list[float], threshold: float) -> float:
    """The metric value a step policy acts on: the alarm's datapoints aggregated by
    ``MetricAggregationType`` (Average by default); the threshold itself when there is none."""
    if not values:
        return threshold
    aggregation = config.get("MetricAggregationType", "Average")
    if aggregation == "Minimum":
        return min(values)
    if aggregation == "Maximum":
        return max(values)
    return sum(values) / len(values)


def not_found(message: str) -> AwsError:
    """Application Auto Scaling's ``ObjectNotFoundException``."""
    return AwsError("ObjectNotFoundException", message)


@dataclass
class ScalableTarget:
    """A registered scalable target."""

    key: TargetKey
    arn: str
    min_capacity: int
    max_capacity: int
    role_arn: str
    created: datetime
    suspended: dict[str, bool] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def region(self) -> str:
        """The target's region."""
        return self.key[0]


@dataclass
class Policy:
    """A scaling policy; ``alarms`` are the (name, ARN) of the alarms created for target tracking."""

    name: str
    arn: str
    key: TargetKey
    policy_type: str
    configuration: dict[str, Any]
    created: datetime
    alarms: list[tuple[str, str]] = field(default_factory=list)
    high_alarm: str | None = None
    last_action: datetime | None = None
    last_scale_out: datetime | None = None
    last_scale_in: datetime | None = None


@dataclass
class Activity:
    """A scaling activity as ``DescribeScalingActivities`` reports it."""

    key: TargetKey
    activity_id: str
    description: str
    cause: str
    at: datetime
    status: str
    message: str


class AutoScaling:
    """Scalable targets, policies and activities per region, and the ticker that applies policies."""

    def __init__(self, ctx: Context, hosting: Hosting, evaluator: AlarmEvaluator) -> None:
        self.ctx = ctx
        self.hosting = hosting
        self.evaluator = evaluator
        self.targets: dict[TargetKey, ScalableTarget] = {}
        self.policies: dict[tuple[TargetKey, str], Policy] = {}
        self.activities: list[Activity] = []

    def operations(self) -> dict[str, Handler]:
        """Operation name -> handler."""
        return {
            "RegisterScalableTarget": self.register_target,
            "DeregisterScalableTarget": self.deregister_target,
            "DescribeScalableTargets": self.describe_targets,
            "PutScalingPolicy": self.put_policy,
            "DeleteScalingPolicy": self.delete_policy,
            "DescribeScalingPolicies": self.describe_policies,
            "DescribeScalingActivities": self.describe_activities,
            "TagResource": self.tag_resource,
            "UntagResource": self.untag_resource,
            "ListTagsForResource": self.list_tags,
        }

    # -- capacity of the resources --------------------------------------------------------------

    @staticmethod
    def _check_namespace(namespace: str) -> None:
        if namespace != "sagemaker":
            raise validation(
                f"Unsupported service namespace {namespace}: the local cloud emulates Application Auto "
                "Scaling for the sagemaker namespace only."
            )

    def _check_resource(self, region: str, resource_id: str, dimension: str) -> None:
        parts = resource_id.split("/")
        if dimension == IC_DIMENSION:
            if len(parts) != 2 or parts[0] != "inference-component":
                raise validation(
                    f"Unsupported resource ID {resource_id} for scalable dimension {dimension}: "
                    "expected inference-component/<name>."
                )
            if self.hosting.find_component(region, parts[1]) is None:
                raise validation(f"The inference component {parts[1]} does not exist.")
            return
        if dimension == VARIANT_DIMENSION:
            if len(parts) != 4 or parts[0] != "endpoint" or parts[2] != "variant":
                raise validation(
                    f"Unsupported resource ID {resource_id} for scalable dimension {dimension}: "
                    "expected endpoint/<name>/variant/<variant>."
                )
            if self.hosting.find_variant(region, parts[1], parts[3]) is None:
                raise validation(f"The endpoint {parts[1]} or its variant {parts[3]} does not exist.")
            return
        raise validation(
            f"Unsupported scalable dimension {dimension} (emulated: {IC_DIMENSION}, {VARIANT_DIMENSION})."
        )

    def capacity(self, key: TargetKey, now: datetime) -> int | None:
        """The current desired capacity of a target's resource (None if the resource is gone)."""
        region, _namespace, resource_id, dimension = key
        parts = resource_id.split("/")
        if dimension == IC_DIMENSION:
            component = self.hosting.find_component(region, parts[1])
            return None if component is None else component.desired(now)
        found = self.hosting.find_variant(region, parts[1], parts[3])
        if found is None:
            return None
        return self.hosting.variant_desired_instances(region, found[0], found[1], now)

    def _set_capacity(self, key: TargetKey, count: int, now: datetime, cause: str) -> None:
        region, _namespace, resource_id, dimension = key
        parts = resource_id.split("/")
        noun = "copy count" if dimension == IC_DIMENSION else "instance count"
        try:
            if dimension == IC_DIMENSION:
                component = self.hosting.find_component(region, parts[1])
                if component is None:
                    raise validation(f"The inference component {parts[1]} does not exist.")
                self.hosting.change_copies(region, component, count, now)
            else:
                found = self.hosting.find_variant(region, parts[1], parts[3])
                if found is None:
                    raise validation(f"The endpoint variant {resource_id} does not exist.")
                self.hosting.set_variant_instances(found[0], found[1], count, now)
        except AwsError as error:
            status, message = "Failed", f"Failed to set desired {noun} to {count}. Reason: {error.message}"
        else:
            status = "Successful"
            message = (
                f"Successfully set desired {noun} to {count}. Change successfully fulfilled by sagemaker."
            )
        self.activities.append(
            Activity(
                key,
                self.ctx.uuid("activity", *key),
                f"Setting desired {noun} to {count}.",
                cause,
                now,
                status,
                message,
            )
        )

    # -- targets --------------------------------------------------------------------------------

    def _key(self, params: Params, region: str) -> TargetKey:
        return (region, params["ServiceNamespace"], params["ResourceId"], params["ScalableDimension"])

    def register_target(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``RegisterScalableTarget``: create, or update Min/Max of, a target; a current capacity outside
        the new range is brought into it."""
        del faults
        self._check_namespace(params["ServiceNamespace"])
        key = self._key(params, region)
        self._check_resource(region, key[2], key[3])
        now = utcnow()
        target = self.targets.get(key)
        low, high = params.get("MinCapacity"), params.get("MaxCapacity")
        if target is None and (low is None or high is None):
            raise validation("MinCapacity and MaxCapacity are required to register a new scalable target.")
        for name, value in (("MinCapacity", low), ("MaxCapacity", high)):
            if value is not None and value < 0:
                raise validation(f"{name} must be 0 or more.")
        new_low = low if low is not None else target.min_capacity if target else 0
        new_high = high if high is not None else target.max_capacity if target else 0
        if new_low > new_high:
            raise validation(
                f"Minimum capacity ({new_low}) cannot be greater than maximum capacity ({new_high})."
            )
        if target is None:
            target = ScalableTarget(
                key=key,
                arn=(
                    f"arn:aws:application-autoscaling:{region}:{self.ctx.account_id}:scalable-target/"
                    f"{self.ctx.new_id('scalable-target', *key, length=36)}"
                ),
                min_capacity=new_low,
                max_capacity=new_high,
                role_arn=params.get("RoleARN")
                or (
                    f"arn:aws:iam::{self.ctx.account_id}:role/aws-service-role/sagemaker.application-autoscaling."
                    "amazonaws.com/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
                ),
                created=now,
                # Tags apply when the target is created; TagResource changes them later.
                tags=dict(params.get("Tags") or {}),
            )
            self.targets[key] = target
        target.min_capacity, target.max_capacity = new_low, new_high
        if params.get("SuspendedState"):
            target.suspended.update(params["SuspendedState"])
        current = self.capacity(key, now)
        if current is not None and not new_low <= current <= new_high:
            bounded = min(max(current, new_low), new_high)
            self._set_capacity(
                key, bounded, now, f"capacity was outside the new range [{new_low}, {new_high}]"
            )
        return {"ScalableTargetARN": target.arn}

    def deregister_target(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DeregisterScalableTarget``: also deletes the target's policies and their alarms."""
        del faults
        key = self._key(params, region)
        if key not in self.targets:
            raise not_found(self._target_missing(key))
        for policy_key in [policy_key for policy_key in self.policies if policy_key[0] == key]:
            self._drop_policy(policy_key)
        del self.targets[key]
        return {}

    # -- tags ("Tagging support for Application Auto Scaling": scalable targets only) ---------------

    def _target_by_arn(self, arn: str) -> ScalableTarget:
        for target in self.targets.values():
            if target.arn == arn:
                return target
        raise AwsError("ResourceNotFoundException", f"Scalable target with ARN {arn} not found.")

    def tag_resource(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``TagResource`` on a scalable target ARN (at most 50 tags per target)."""
        del region, faults
        target = self._target_by_arn(params["ResourceARN"])
        merged = {**target.tags, **params["Tags"]}
        if len(merged) > 50:
            raise AwsError("TooManyTagsException", "A scalable target can have at most 50 tags.")
        target.tags = merged
        return {}

    def untag_resource(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``UntagResource`` on a scalable target ARN."""
        del region, faults
        target = self._target_by_arn(params["ResourceARN"])
        for key in params["TagKeys"]:
            target.tags.pop(key, None)
        return {}

    def list_tags(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``ListTagsForResource`` of a scalable target ARN."""
        del region, faults
        return {"Tags": dict(self._target_by_arn(params["ResourceARN"]).tags)}

    @staticmethod
    def _target_missing(key: TargetKey) -> str:
        return (
            f"No scalable target registered for service namespace: {key[1]}, resource ID: {key[2]}, "
            f"scalable dimension: {key[3]}"
        )

    def describe_targets(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeScalableTargets`` filtered by ``ResourceIds`` and ``ScalableDimension``, paginated."""
        del faults
        found = [
            target
            for key, target in self.targets.items()
            if key[0] == region
            and key[1] == params["ServiceNamespace"]
            and (not params.get("ResourceIds") or key[2] in params["ResourceIds"])
            and (not params.get("ScalableDimension") or key[3] == params["ScalableDimension"])
        ]
        page, token = paginate(found, params, default_max=50)
        response: Response = {
            "ScalableTargets": [
                {
                    "ServiceNamespace": target.key[1],
                    "ResourceId": target.key[2],
                    "ScalableDimension": target.key[3],
                    "MinCapacity": target.min_capacity,
                    "MaxCapacity": target.max_capacity,
                    "RoleARN": target.role_arn,
                    "CreationTime": target.created,
                    "SuspendedState": {
                        "DynamicScalingInSuspended": target.suspended.get("DynamicScalingInSuspended", False),
                        "DynamicScalingOutSuspended": target.suspended.get(
                            "DynamicScalingOutSuspended", False
                        ),
                        "ScheduledScalingSuspended": target.suspended.get("ScheduledScalingSuspended", False),
                    },
                    "ScalableTargetARN": target.arn,
                }
                for target in page
            ]
        }
        if token:
            response["NextToken"] = token
        return response

    # -- policies -------------------------------------------------------------------------------

    def put_policy(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``PutScalingPolicy`` (create or replace). Target tracking creates its alarms in moto."""
        del faults
        self._check_namespace(params["ServiceNamespace"])
        key = self._key(params, region)
        if key not in self.targets:
            raise not_found(self._target_missing(key))
        policy_type = params.get("PolicyType") or "StepScaling"
        if policy_type == "StepScaling":
            configuration = params.get("StepScalingPolicyConfiguration")
            if (
                not configuration
                or not configuration.get("StepAdjustments")
                or not configuration.get("AdjustmentType")
            ):
                raise validation(
                    "StepScalingPolicyConfiguration with AdjustmentType and StepAdjustments is "
                    "required for a StepScaling policy."
                )
        elif policy_type == "TargetTrackingScaling":
            configuration = params.get("TargetTrackingScalingPolicyConfiguration")
            if not configuration:
                raise validation(
                    "TargetTrackingScalingPolicyConfiguration is required for a TargetTrackingScaling policy."
                )
            self._metric_of(configuration, key)
        else:
            raise validation(f"Policy type {policy_type} is not supported for SageMaker by the local cloud.")
        name = params["PolicyName"]
        now = utcnow()
        existing = self.policies.get((key, name))
        if existing is not None:
            self._delete_alarms(existing)
        policy = Policy(
            name=name,
            arn=existing.arn
            if existing
            else (
                f"arn:aws:autoscaling:{region}:{self.ctx.account_id}:scalingPolicy:"
                f"{self.ctx.uuid('policy', *key, name)}:resource/{key[1]}/{key[2]}:policyName/{name}"
            ),
            key=key,
            policy_type=policy_type,
            configuration=dict(configuration),
            created=existing.created if existing else now,
        )
        self.policies[(key, name)] = policy
        response: Response = {"PolicyARN": policy.arn}
        if policy_type == "TargetTrackingScaling":
            self._create_alarms(policy)
            response["Alarms"] = [{"AlarmName": alarm, "AlarmARN": arn} for alarm, arn in policy.alarms]
        return response

    def _metric_of(
        self, configuration: dict[str, Any], key: TargetKey
    ) -> tuple[str, str, dict[str, str], str, int]:
        """(namespace, metric, dimensions, statistic, period) a target-tracking policy tracks."""
        predefined = configuration.get("PredefinedMetricSpecification")
        resource = key[2].split("/")
        if predefined:
            kind = predefined["PredefinedMetricType"]
            if kind not in _PREDEFINED or _PREDEFINED[kind][0] != key[3]:
                raise validation(
                    f"The predefined metric type {kind} is not valid for scalable dimension {key[3]}."
                )
            _dimension, metric, stat, period = _PREDEFINED[kind]
            dimensions = (
                {"InferenceComponentName": resource[1]}
                if key[3] == IC_DIMENSION
                else {"EndpointName": resource[1], "VariantName": resource[3]}
            )
            return cloudwatch.SAGEMAKER_NAMESPACE, metric, dimensions, stat, period
        custom = configuration.get("CustomizedMetricSpecification")
        if not custom or not custom.get("MetricName") or not custom.get("Namespace"):
            raise validation(
                "A target tracking policy needs a PredefinedMetricSpecification or a "
                "CustomizedMetricSpecification with MetricName and Namespace (metric math is not "
                "emulated)."
            )
        dimensions = {item["Name"]: item["Value"] for item in custom.get("Dimensions") or []}
        return custom["Namespace"], custom["MetricName"], dimensions, custom.get("Statistic", "Average"), 60

    def _create_alarms(self, policy: Policy) -> None:
        namespace, metric, dimensions, stat, period = self._metric_of(policy.configuration, policy.key)
        target_value = float(policy.configuration["TargetValue"])
        backend = cloudwatch.backend(self.ctx.account_id, policy.key[0])
        suffix = self.ctx.uuid("alarm", *policy.key, policy.name)
        per_minute = max(1, 60 // period)
        specs = [("AlarmHigh", "GreaterThanThreshold", target_value, 3 * per_minute, "missing")]
        if not policy.configuration.get("DisableScaleIn"):
            # Missing minutes are missing, not low: no datapoints, no scale-in (see the module docstring).
            specs.append(("AlarmLow", "LessThanThreshold", target_value * 0.9, 15 * per_minute, "missing"))
        for label, operator, threshold, periods, missing in specs:
            name = f"TargetTracking-{policy.key[2]}-{label}-{suffix}"
            alarm = backend.put_metric_alarm(
                name=name,
                namespace=namespace,
                metric_name=metric,
                comparison_operator=operator,
                evaluation_periods=periods,
                period=period,
                threshold=threshold,
                statistic=stat,
                description=(f"DO NOT EDIT OR DELETE. For TargetTrackingScaling policy {policy.arn}."),
                dimensions=[{"Name": key, "Value": value} for key, value in dimensions.items()],
                alarm_actions=[policy.arn],
                datapoints_to_alarm=periods,
                treat_missing_data=missing,
            )
            policy.alarms.append((name, alarm.alarm_arn))
            if label == "AlarmHigh":
                policy.high_alarm = name

    def _delete_alarms(self, policy: Policy) -> None:
        if policy.alarms:
            backend = cloudwatch.backend(self.ctx.account_id, policy.key[0])
            backend.delete_alarms([name for name, _arn in policy.alarms])
            policy.alarms = []

    def _drop_policy(self, policy_key: tuple[TargetKey, str]) -> None:
        policy = self.policies.pop(policy_key)
        self._delete_alarms(policy)

    def delete_policy(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DeleteScalingPolicy`` (and the alarms target tracking created)."""
        del faults
        key = self._key(params, region)
        policy_key = (key, params["PolicyName"])
        if policy_key not in self.policies:
            raise not_found(
                f"No scaling policy found for service namespace: {key[1]}, resource ID: {key[2]}, scalable "
                f"dimension: {key[3]}, policy name: {params['PolicyName']}"
            )
        self._drop_policy(policy_key)
        return {}

    def describe_policies(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeScalingPolicies`` filtered by names, resource and dimension, paginated."""
        del faults
        found = [
            policy
            for (key, name), policy in self.policies.items()
            if key[0] == region
            and key[1] == params["ServiceNamespace"]
            and (not params.get("PolicyNames") or name in params["PolicyNames"])
            and (not params.get("ResourceId") or key[2] == params["ResourceId"])
            and (not params.get("ScalableDimension") or key[3] == params["ScalableDimension"])
        ]
        page, token = paginate(found, params, default_max=50)
        policies = []
        for policy in page:
            shaped: dict[str, Any] = {
                "PolicyARN": policy.arn,
                "PolicyName": policy.name,
                "ServiceNamespace": policy.key[1],
                "ResourceId": policy.key[2],
                "ScalableDimension": policy.key[3],
                "PolicyType": policy.policy_type,
                "Alarms": [{"AlarmName": name, "AlarmARN": arn} for name, arn in policy.alarms],
                "CreationTime": policy.created,
            }
            field_name = (
                "StepScalingPolicyConfiguration"
                if policy.policy_type == "StepScaling"
                else "TargetTrackingScalingPolicyConfiguration"
            )
            shaped[field_name] = policy.configuration
            policies.append(shaped)
        response: Response = {"ScalingPolicies": policies}
        if token:
            response["NextToken"] = token
        return response

    def describe_activities(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeScalingActivities``, newest first, paginated."""
        del faults
        found = [
            activity
            for activity in reversed(self.activities)
            if activity.key[0] == region
            and activity.key[1] == params["ServiceNamespace"]
            and (not params.get("ResourceId") or activity.key[2] == params["ResourceId"])
            and (not params.get("ScalableDimension") or activity.key[3] == params["ScalableDimension"])
        ]
        page, token = paginate(found, params, default_max=50)
        response: Response = {
            "ScalingActivities": [
                {
                    "ActivityId": activity.activity_id,
                    "ServiceNamespace": activity.key[1],
                    "ResourceId": activity.key[2],
                    "ScalableDimension": activity.key[3],
                    "Description": activity.description,
                    "Cause": activity.cause,
                    "StartTime": activity.at,
                    "EndTime": activity.at,
                    "StatusCode": activity.status,
                    "StatusMessage": activity.message,
                }
                for activity in page
            ]
        }
        if token:
            response["NextToken"] = token
        return response

    # -- applying policies (the Ticker) ---------------------------------------------------------

    def _proposal(self, policy: Policy, alarm_name: str, now: datetime) -> tuple[int, int] | None:
        """(current, new) capacity if the policy, triggered by ``alarm_name``, would change it now."""
        target = self.targets.get(policy.key)
        current = self.capacity(policy.key, now)
        found = self.evaluator.current(policy.key[0], alarm_name, now)
        if target is None or current is None or found is None:
            return None
        _alarm, spec, evaluation = found
        if policy.policy_type == "StepScaling":
            new = self._step(
                policy.configuration,
                current,
                _aggregate(policy.configuration, evaluation.present(), spec.threshold) - spec.threshold,
            )
        else:
            new = self._tracked(policy, alarm_name, current, evaluation.present())
        if new is None:
            return None
        new = max(target.min_capacity, min(target.max_capacity, new))
        suspended = target.suspended.get(
            "DynamicScalingOutSuspended" if new > current else "DynamicScalingInSuspended"
        )
        return None if new == current or suspended else (current, new)

    @staticmethod
    def _tracked(policy: Policy, alarm_name: str, current: int, values: list[float]) -> int | None:
        """Target tracking: ``ceil(current * metric / target)``, out on the high alarm, in on the low one;
        None without datapoints (insufficient data is not low utilization)."""
        config = policy.configuration
        if not values:
            return None
        value = values[-1]
        wanted = math.ceil(current * value / float(config["TargetValue"]) - 1e-9)
        if alarm_name == policy.high_alarm:
            return wanted if wanted > current else None
        if config.get("DisableScaleIn") or wanted >= current:
            return None
        return wanted

    @staticmethod
    def _step(config: dict[str, Any], current: int, delta: float) -> int | None:
        for step in config["StepAdjustments"]:
            lower = step.get("MetricIntervalLowerBound", -math.inf)
            upper = step.get("MetricIntervalUpperBound", math.inf)
            if lower <= delta < upper or (delta == upper == math.inf):
                adjustment = int(step["ScalingAdjustment"])
                kind = config["AdjustmentType"]
                if kind == "ExactCapacity":
                    return adjustment
                if kind == "PercentChangeInCapacity":
                    change = int(current * adjustment / 100)
                    magnitude = int(config.get("MinAdjustmentMagnitude") or 0)
                    if abs(change) < magnitude:
                        change = magnitude if adjustment > 0 else -magnitude
                    return current + change
                return current + adjustment
        return None

    def _ready_at(self, policy: Policy, scale_out: bool) -> datetime | None:
        config = policy.configuration
        if policy.policy_type == "StepScaling":
            if policy.last_action is None:
                return None
            return policy.last_action + timedelta(seconds=int(config.get("Cooldown", DEFAULT_COOLDOWN)))
        out_ready = (
            policy.last_scale_out + timedelta(seconds=int(config.get("ScaleOutCooldown", DEFAULT_COOLDOWN)))
            if policy.last_scale_out
            else None
        )
        if scale_out:
            return out_ready
        in_ready = (
            policy.last_scale_in + timedelta(seconds=int(config.get("ScaleInCooldown", DEFAULT_COOLDOWN)))
            if policy.last_scale_in
            else None
        )
        candidates = [moment for moment in (out_ready, in_ready) if moment is not None]
        return max(candidates) if candidates else None

    def _pending(self, now: datetime) -> list[tuple[datetime, Policy, str]]:
        """(when, policy, alarm name) of every action some alarm in ALARM would trigger."""
        found: list[tuple[datetime, Policy, str]] = []
        reaction = self.ctx.market.config.timings.autoscaling_reaction
        for policy in self.policies.values():
            backend = cloudwatch.backend(self.ctx.account_id, policy.key[0])
            for alarm in list(backend.alarms.values()):
                if (
                    alarm.state_value != "ALARM"
                    or not alarm.actions_enabled
                    or policy.arn not in (alarm.alarm_actions or [])
                ):
                    continue
                proposal = self._proposal(policy, alarm.name, now)
                if proposal is None:
                    continue
                # While the alarm stays in ALARM, CloudWatch invokes the action again once a minute.
                moments = [as_utc(alarm.state_updated_timestamp) + reaction]
                if policy.last_action is not None:
                    moments.append(policy.last_action + reaction)
                ready = self._ready_at(policy, proposal[1] > proposal[0])
                if ready is not None:
                    moments.append(ready)
                found.append((max(moments), policy, alarm.name))
        return found

    def alarm_fired(self, region: str, alarm: Any, moment: datetime) -> None:
        """An alarm entered ``ALARM`` at ``moment``: run the policies among its actions now (CloudWatch
        invokes actions on the state change), unless a cooldown holds them back (the ticker retries then)."""
        for policy in list(self.policies.values()):
            if policy.key[0] != region or policy.arn not in (alarm.alarm_actions or []):
                continue
            proposal = self._proposal(policy, alarm.name, moment)
            if proposal is None:
                continue
            ready = self._ready_at(policy, proposal[1] > proposal[0])
            if ready is None or ready <= moment:
                self._apply(policy, alarm.name, proposal, moment)

    def _apply(self, policy: Policy, alarm_name: str, proposal: tuple[int, int], now: datetime) -> None:
        current, new = proposal
        cause = f"monitor alarm {alarm_name} in state ALARM triggered policy {policy.name}"
        self._set_capacity(policy.key, new, now, cause)
        policy.last_action = now
        if new > current:
            policy.last_scale_out = now
        else:
            policy.last_scale_in = now

    def next_due(self, now: datetime) -> Due | None:
        """The next instant a policy would change a capacity, or None (background)."""
        with self.ctx.lock:
            pending = self._pending(now)
        if not pending:
            return None
        return Due(
            max(min(moment for moment, _policy, _alarm in pending), now + timedelta(microseconds=1)),
            foreground=False,
        )

    def advance(self, now: datetime) -> None:
        """Apply every policy action due at or before ``now``."""
        with self.ctx.lock:
            for moment, policy, alarm_name in sorted(self._pending(now), key=lambda item: item[0]):
                if moment > now:
                    continue
                proposal = self._proposal(policy, alarm_name, now)
                if proposal is not None:
                    self._apply(policy, alarm_name, proposal, now)

    def billable(self) -> list[tuple[str, str, str, str]]:
        """(kind, name, ARN, region) of every scalable target and policy."""
        found = [
            ("scalable-target", target.key[2], target.arn, target.region) for target in self.targets.values()
        ]
        found.extend(
            ("scaling-policy", policy.name, policy.arn, policy.key[0]) for policy in self.policies.values()
        )
        return found
