"""Application Auto Scaling adapter: the copy count of inference components (seed 004; AWS_FACTS.md
"Scaling inference components"; Application Auto Scaling API reference).

Scalable target: ``ServiceNamespace="sagemaker"``, ``ResourceId="inference-component/<name>"``,
``ScalableDimension="sagemaker:inference-component:DesiredCopyCount"``; ``MinCapacity`` 0 is a value and is
sent as 0. Policies: target tracking on the predefined metric
``SageMakerInferenceComponentInvocationsPerCopy``.

Errors: throttling/5xx/timeouts after botocore's retries become
:class:`~capacity.errors.RetryableAwsError`; ``ObjectNotFoundException`` on a delete or deregister means
"already gone" (False); ``ConcurrentUpdateException`` (another change is under way) becomes
:class:`~capacity.errors.ResourceBusy`; anything else is raised as is (a ``ValidationException`` is a bug
or a resource that is not there, never retried).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from botocore.exceptions import ClientError

from capacity.adapters import clients
from capacity.adapters.clients import error_code, error_message
from capacity.errors import ResourceBusy

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient

NAMESPACE: Final[Literal["sagemaker"]] = "sagemaker"
COPY_COUNT_DIMENSION: Final[Literal["sagemaker:inference-component:DesiredCopyCount"]] = (
    "sagemaker:inference-component:DesiredCopyCount"
)
INVOCATIONS_PER_COPY = "SageMakerInferenceComponentInvocationsPerCopy"


def component_resource_id(component_name: str) -> str:
    """``inference-component/<name>``: the ``ResourceId`` of an inference component's scalable target."""
    return f"inference-component/{component_name}"


class AutoScalingAdapter:
    """Scalable targets and policies of inference components in one region.

    Args:
        region: the region of the endpoint (targets are regional).
        client: an Application Auto Scaling client; default the cached one.
    """

    def __init__(self, region: str, client: ApplicationAutoScalingClient | None = None) -> None:
        self.region = region
        self._client = client or clients.application_autoscaling(region)

    def _call[T](self, operation: str, function: Callable[[], T]) -> T:
        def busy(exc: ClientError) -> ResourceBusy | None:
            if error_code(exc) == "ConcurrentUpdateException":
                return ResourceBusy(f"{operation}: {error_message(exc)}")
            return None

        return clients.call(f"Application Auto Scaling {operation} ({self.region})", function, specific=busy)

    def register_component(
        self, component_name: str, *, min_copies: int, max_copies: int, tags: Sequence[Mapping[str, str]]
    ) -> None:
        """``RegisterScalableTarget`` for the component's copy count (an upsert: a retry is harmless).

        Args:
            min_copies: ``MinCapacity`` (0 allowed: scale to zero).
            max_copies: ``MaxCapacity``.
            tags: ``[{"Key", "Value"}]``, sent as the ``Tags`` map.
        """
        self._call(
            "RegisterScalableTarget",
            lambda: self._client.register_scalable_target(
                ServiceNamespace=NAMESPACE,
                ResourceId=component_resource_id(component_name),
                ScalableDimension=COPY_COUNT_DIMENSION,
                MinCapacity=min_copies,
                MaxCapacity=max_copies,
                Tags={tag["Key"]: tag["Value"] for tag in tags},
            ),
        )

    def suspend_scale_in(self, component_name: str, *, suspended: bool) -> None:
        """``RegisterScalableTarget`` with only ``SuspendedState.DynamicScalingInSuspended`` (the target
        must be registered): while a copy starts from zero, target tracking must not scale it back in on
        the minutes without invocations ("Suspending and resuming scaling", Application Auto Scaling user
        guide)."""
        self._call(
            "RegisterScalableTarget",
            lambda: self._client.register_scalable_target(
                ServiceNamespace=NAMESPACE,
                ResourceId=component_resource_id(component_name),
                ScalableDimension=COPY_COUNT_DIMENSION,
                SuspendedState={"DynamicScalingInSuspended": suspended},
            ),
        )

    def put_invocations_policy(
        self,
        component_name: str,
        *,
        policy_name: str,
        target_value: float,
        scale_in_cooldown: int,
        scale_out_cooldown: int,
    ) -> str:
        """``PutScalingPolicy``: target tracking on ``SageMakerInferenceComponentInvocationsPerCopy``
        (an upsert). Returns the policy ARN. Cooldowns in seconds."""
        configuration: Any = {
            "TargetValue": float(target_value),
            "PredefinedMetricSpecification": {"PredefinedMetricType": INVOCATIONS_PER_COPY},
            "ScaleInCooldown": scale_in_cooldown,
            "ScaleOutCooldown": scale_out_cooldown,
        }
        answer = self._call(
            "PutScalingPolicy",
            lambda: self._client.put_scaling_policy(
                PolicyName=policy_name,
                ServiceNamespace=NAMESPACE,
                ResourceId=component_resource_id(component_name),
                ScalableDimension=COPY_COUNT_DIMENSION,
                PolicyType="TargetTrackingScaling",
                TargetTrackingScalingPolicyConfiguration=configuration,
            ),
        )
        return str(answer["PolicyARN"])

    def policy_names(self, component_name: str) -> list[str]:
        """Names of every scaling policy on the component's target (all pages)."""
        return [
            str(item["PolicyName"])
            for item in self._pages(
                "DescribeScalingPolicies",
                "ScalingPolicies",
                lambda kw: self._client.describe_scaling_policies(**kw),
                ResourceId=component_resource_id(component_name),
                ScalableDimension=COPY_COUNT_DIMENSION,
            )
        ]

    def delete_policy(self, component_name: str, policy_name: str) -> bool:
        """``DeleteScalingPolicy`` (AWS also deletes the alarms target tracking created). False if gone."""
        try:
            self._call(
                "DeleteScalingPolicy",
                lambda: self._client.delete_scaling_policy(
                    PolicyName=policy_name,
                    ServiceNamespace=NAMESPACE,
                    ResourceId=component_resource_id(component_name),
                    ScalableDimension=COPY_COUNT_DIMENSION,
                ),
            )
        except ClientError as exc:
            if error_code(exc) == "ObjectNotFoundException":
                return False
            raise
        return True

    def deregister_component(self, component_name: str) -> bool:
        """``DeregisterScalableTarget`` of the component's copy count. False if it was not registered."""
        try:
            self._call(
                "DeregisterScalableTarget",
                lambda: self._client.deregister_scalable_target(
                    ServiceNamespace=NAMESPACE,
                    ResourceId=component_resource_id(component_name),
                    ScalableDimension=COPY_COUNT_DIMENSION,
                ),
            )
        except ClientError as exc:
            if error_code(exc) == "ObjectNotFoundException":
                return False
            raise
        return True

    def registered(self, component_names: Sequence[str]) -> list[str]:
        """The names among ``component_names`` that still have a registered scalable target."""
        if not component_names:
            return []
        wanted = {component_resource_id(name): name for name in component_names}
        found = self._pages(
            "DescribeScalableTargets",
            "ScalableTargets",
            lambda kw: self._client.describe_scalable_targets(**kw),
            ResourceIds=list(wanted),
            ScalableDimension=COPY_COUNT_DIMENSION,
        )
        return sorted({wanted[str(item["ResourceId"])] for item in found if item["ResourceId"] in wanted})

    def _pages(
        self, operation: str, key: str, method: Callable[[dict[str, Any]], Any], **filters: Any
    ) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = dict(filters, ServiceNamespace=NAMESPACE)
            if token:
                kwargs["NextToken"] = token
            page = self._call(operation, lambda kw=kwargs: method(kw))  # type: ignore[misc]
            yield from page.get(key, [])
            token = page.get("NextToken")
            if not token:
                return
