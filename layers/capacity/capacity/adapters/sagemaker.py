"""SageMaker adapter: training plans, endpoint configs, endpoints and inference components.

Over 400 lines: one adapter per AWS service, and SageMaker's is the widest API the app calls.

Shapes follow the botocore service model installed with the layer (boto3/botocore 1.44.5) and the
SageMaker API reference. ``ClientError`` codes become domain errors (``raise X from exc``):

========================================== ==============================================================
throttling / 5xx / timeouts (after retries) :class:`~capacity.errors.RetryableAwsError`
``ResourceLimitExceeded``                   :class:`~capacity.errors.QuotaExceeded`
``ResourceInUse`` on ``CreateTrainingPlan`` :class:`~capacity.errors.TrainingPlanNameInUse` (adopt it)
``ValidationException``/``ResourceNotFound`` mentioning the offering on ``CreateTrainingPlan``
                                            :class:`~capacity.errors.OfferingExpired`
"could not find" / ``ResourceNotFound``     "not found": ``describe_*`` return None, ``delete_*`` False
"already exist(s)" on ``Create*``           "exists": ``create_*`` return False (adopt it)
changes while ``Creating``/``Updating``     :class:`~capacity.errors.ResourceBusy`
========================================== ==============================================================

SageMaker reports a missing endpoint, endpoint config or inference component as ``ValidationException``
("Could not find endpoint ..."), and a missing training plan as ``ResourceNotFound``; both are handled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from capacity.adapters import clients
from capacity.adapters.clients import error_code, error_message
from capacity.errors import (
    OfferingExpired,
    PurchaseFailed,
    QuotaExceeded,
    ResourceBusy,
    TrainingPlanNameInUse,
)
from capacity.resources import Extension, TrainingPlan
from capacity.timeutil import as_utc

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

_NOT_FOUND_PHRASES = ("could not find", "not found", "does not exist", "cannot find", "no such")
_EXISTS_PHRASES = ("already exist", "cannot create already existing")
_BUSY_PHRASES = ("creating", "updating", "in progress", "in-progress", "being deleted")


_PLAN_PAYMENT = {"Pending": "pending", "Completed": "paid", "Failed": "failed"}


def _plan_extension(item: Mapping[str, Any], status: str | None) -> Extension:
    """A ``TrainingPlanExtensionOffering``/``TrainingPlanExtension`` as an :class:`Extension` (an unknown
    ``PaymentStatus`` reads ``pending``: never taken as paid)."""
    return Extension(
        offering_id=str(item["TrainingPlanExtensionOfferingId"]),
        start_time=as_utc(item["StartDate"]),
        end_time=as_utc(item["EndDate"]),
        duration_hours=int(item.get("DurationHours") or 0),
        upfront_fee_usd=Decimal(str(item.get("UpfrontFee") or "0")),
        availability_zone=item.get("AvailabilityZone"),
        status=status or _PLAN_PAYMENT.get(str(item.get("PaymentStatus")), "pending"),
    )


@dataclass(frozen=True)
class EndpointInfo:
    """``DescribeEndpoint`` essentials."""

    name: str
    arn: str
    status: str
    failure_reason: str | None
    config_name: str | None
    created: datetime | None = None
    """``CreationTime`` (UTC)."""
    instance_count: int | None = None
    """The sum of ``ProductionVariants[].CurrentInstanceCount`` (None when AWS does not say yet)."""


@dataclass(frozen=True)
class ComponentInfo:
    """``DescribeInferenceComponent``/``ListInferenceComponents`` essentials."""

    name: str
    arn: str
    status: str
    endpoint_name: str
    failure_reason: str | None = None
    desired_copies: int | None = None
    """``RuntimeConfig.DesiredCopyCount`` (``DescribeInferenceComponent`` only; None from listings)."""
    current_copies: int | None = None
    """``RuntimeConfig.CurrentCopyCount`` (``DescribeInferenceComponent`` only)."""


def _is_not_found(exc: ClientError) -> bool:
    code = error_code(exc)
    message = error_message(exc).lower()
    return code in ("ResourceNotFound", "ResourceNotFoundException") or (
        code in ("ValidationException", "ValidationError") and any(p in message for p in _NOT_FOUND_PHRASES)
    )


def _is_exists(exc: ClientError) -> bool:
    code = error_code(exc)
    message = error_message(exc).lower()
    return code == "ResourceInUse" or (
        code in ("ValidationException", "ValidationError") and any(p in message for p in _EXISTS_PHRASES)
    )


def _is_busy(exc: ClientError) -> bool:
    message = error_message(exc).lower()
    return error_code(exc) in ("ValidationException", "ValidationError", "ConflictException") and any(
        p in message for p in _BUSY_PHRASES
    )


def _fee(text: Any) -> Decimal | None:
    try:
        return Decimal(str(text)) if text not in (None, "") else None
    except InvalidOperation:
        return None


def _utc(value: Any) -> datetime | None:
    return as_utc(value) if isinstance(value, datetime) else None


def _plan(data: Mapping[str, Any]) -> TrainingPlan:
    summaries = data.get("ReservedCapacitySummaries") or []
    return TrainingPlan(
        arn=str(data["TrainingPlanArn"]),
        name=str(data["TrainingPlanName"]),
        status=str(data["Status"]),
        status_message=data.get("StatusMessage"),
        start_time=_utc(data.get("StartTime")),
        end_time=_utc(data.get("EndTime")),
        upfront_fee_usd=_fee(data.get("UpfrontFee")),
        total_instance_count=data.get("TotalInstanceCount"),
        instance_type=str(summaries[0]["InstanceType"]) if summaries else None,
        in_use_instance_count=_count(data.get("InUseInstanceCount")),
        target_resources=tuple(str(t) for t in data.get("TargetResources") or ()),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class SageMakerAdapter:
    """SageMaker calls for one region, with AWS errors translated into domain errors.

    Args:
        region: the AWS region (training plans and endpoints are regional).
        client: a SageMaker client; default the cached one of :mod:`capacity.adapters.clients`.
    """

    def __init__(self, region: str, client: SageMakerClient | None = None) -> None:
        self.region = region
        self._client = client or clients.sagemaker(region)

    def _call[T](self, operation: str, function: Callable[[], T]) -> T:
        def quota(exc: ClientError) -> QuotaExceeded | None:
            if error_code(exc) == "ResourceLimitExceeded":
                return QuotaExceeded(f"{operation} in {self.region}: {error_message(exc)}")
            return None

        return clients.call(f"SageMaker {operation} ({self.region})", function, specific=quota)

    def _create_once(self, operation: str, function: Callable[[], object]) -> bool:
        """Run a ``Create*`` call; False when the resource already exists (the names are deterministic,
        so a retry meets its own earlier creation), True when this call created it."""
        try:
            self._call(operation, function)
        except ClientError as exc:
            if _is_exists(exc):
                return False
            raise
        return True

    # ------------------------------------------------------------------------------ training plans

    def search_training_plan_offerings(
        self,
        *,
        instance_type: str,
        instance_count: int,
        start_after: datetime,
        end_before: datetime,
        duration_hours: int,
    ) -> list[dict[str, Any]]:
        """``SearchTrainingPlanOfferings`` with ``TargetResources=["endpoint"]``.

        Returns:
            The ``TrainingPlanOfferings`` list as botocore parsed it (``UpfrontFee`` a string).

        Raises:
            QuotaExceeded: ``ResourceLimitExceeded`` (the count is above the account's quota).
            RetryableAwsError: throttling/5xx after retries.
        """
        answer = self._call(
            "SearchTrainingPlanOfferings",
            lambda: self._client.search_training_plan_offerings(
                TargetResources=["endpoint"],
                InstanceType=instance_type,  # type: ignore[arg-type]
                InstanceCount=instance_count,
                StartTimeAfter=start_after,
                EndTimeBefore=end_before,
                DurationHours=duration_hours,
            ),
        )
        return [dict(item) for item in answer.get("TrainingPlanOfferings", [])]

    def create_training_plan(self, *, name: str, offering_id: str, tags: Sequence[Mapping[str, str]]) -> str:
        """``CreateTrainingPlan``: buy the offering. Returns the ``TrainingPlanArn``.

        Raises:
            TrainingPlanNameInUse: ``ResourceInUse`` (a plan with ``name`` exists: adopt it).
            OfferingExpired: the offering id is stale or unknown.
            QuotaExceeded: ``ResourceLimitExceeded``.
            PurchaseFailed: any other rejection.
            RetryableAwsError: throttling/5xx after retries.
        """
        try:
            answer = self._call(
                "CreateTrainingPlan",
                lambda: self._client.create_training_plan(
                    TrainingPlanName=name,
                    TrainingPlanOfferingId=offering_id,
                    Tags=[dict(tag) for tag in tags],  # type: ignore[misc]
                ),
            )
        except ClientError as exc:
            code, message = error_code(exc), error_message(exc)
            if code == "ResourceInUse" or _is_exists(exc):
                raise TrainingPlanNameInUse(f"training plan {name} already exists: {message}") from exc
            if code in ("ValidationException", "ResourceNotFound") and "offering" in message.lower():
                raise OfferingExpired(f"offering {offering_id} can no longer be bought: {message}") from exc
            raise PurchaseFailed(
                f"CreateTrainingPlan {name} in {self.region} failed: {code}: {message}"
            ) from exc
        return str(answer["TrainingPlanArn"])

    def search_plan_extensions(self, plan_arn: str, hours: int) -> list[Extension]:
        """``SearchTrainingPlanOfferings(TrainingPlanArn, DurationHours)``: the plan's extension offerings
        (``status`` ``offered``). Raises ``ClientError`` when the plan cannot be extended (its message says
        why), ``RetryableAwsError`` on throttling/5xx."""
        answer = self._call(
            "SearchTrainingPlanOfferings",
            lambda: self._client.search_training_plan_offerings(
                TrainingPlanArn=plan_arn, DurationHours=hours
            ),
        )
        return [_plan_extension(item, "offered") for item in answer.get("TrainingPlanExtensionOfferings", [])]

    def extend_training_plan(self, offering_id: str) -> Extension:
        """``ExtendTrainingPlan`` once (no botocore retry: no client token, a retried call that committed
        would be refused as stale and hide the purchase).

        Raises:
            OfferingExpired: the offering is stale or unknown (``ValidationException``/``ResourceNotFound``).
            PurchaseFailed: any other rejection (the plan cannot be extended: the message says why).
            RetryableAwsError: throttling/5xx/timeout: it **may** have been bought; look the history up.
        """
        client = clients.client("sagemaker", self.region, clients.DEFAULT_TIMEOUTS.single())
        try:
            answer = self._call(
                "ExtendTrainingPlan",
                lambda: client.extend_training_plan(TrainingPlanExtensionOfferingId=offering_id),
            )
        except ClientError as exc:
            code, message = error_code(exc), error_message(exc)
            if code == "ResourceNotFound" or (
                code == "ValidationException" and "offering" in message.lower()
            ):
                raise OfferingExpired(
                    f"extension offering {offering_id} can no longer be bought: {message}"
                ) from exc
            raise PurchaseFailed(f"ExtendTrainingPlan in {self.region} failed: {code}: {message}") from exc
        items = answer.get("TrainingPlanExtensions") or []
        if not items:
            raise PurchaseFailed(f"ExtendTrainingPlan {offering_id} answered no extension")
        return _plan_extension(items[0], None)

    def plan_extension_history(self, plan_arn: str) -> list[Extension]:
        """``DescribeTrainingPlanExtensionHistory`` (every page), oldest first."""
        found: list[Extension] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"TrainingPlanArn": plan_arn, **({"NextToken": token} if token else {})}
            page = self._call(
                "DescribeTrainingPlanExtensionHistory",
                lambda kw=kwargs: self._client.describe_training_plan_extension_history(**kw),  # type: ignore[misc]
            )
            found.extend(_plan_extension(item, None) for item in page.get("TrainingPlanExtensions", []))
            token = page.get("NextToken")
            if not token:
                return found

    def describe_training_plan(self, name: str) -> TrainingPlan | None:
        """``DescribeTrainingPlan`` by name or ARN; None when there is no such plan."""
        try:
            answer = self._call(
                "DescribeTrainingPlan", lambda: self._client.describe_training_plan(TrainingPlanName=name)
            )
        except ClientError as exc:
            if _is_not_found(exc):
                return None
            raise
        return _plan(answer)

    def find_training_plan(self, name: str) -> TrainingPlan | None:
        """Look ``name`` up with ``ListTrainingPlans`` (all pages); None when absent."""
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = self._call("ListTrainingPlans", lambda kw=kwargs: self._client.list_training_plans(**kw))  # type: ignore[misc]
            for summary in page.get("TrainingPlanSummaries", []):
                if summary.get("TrainingPlanName") == name:
                    return _plan(summary)
            token = page.get("NextToken")
            if not token:
                return None

    # ------------------------------------------------------------------------------ endpoints

    def create_endpoint_config(
        self,
        *,
        name: str,
        variant: Mapping[str, Any],
        execution_role_arn: str,
        tags: Sequence[Mapping[str, str]],
    ) -> bool:
        """``CreateEndpointConfig`` with one production variant. False when it already exists.

        Raises:
            QuotaExceeded: ``ResourceLimitExceeded``.
            ClientError: other rejections (e.g. ``ValidationException`` for a bad variant).
        """
        return self._create_once(
            "CreateEndpointConfig",
            lambda: self._client.create_endpoint_config(
                EndpointConfigName=name,
                ProductionVariants=[dict(variant)],  # type: ignore[list-item]
                ExecutionRoleArn=execution_role_arn,
                Tags=[dict(tag) for tag in tags],  # type: ignore[misc]
            ),
        )

    def model_exists(self, name: str) -> bool:
        """``DescribeModel``: True when the SageMaker model ``name`` exists in this region."""
        try:
            self._call("DescribeModel", lambda: self._client.describe_model(ModelName=name))
        except ClientError as exc:
            # SageMaker answers ValidationException "Could not find model" for a missing model.
            if _is_not_found(exc) or "could not find" in error_message(exc).lower():
                return False
            raise
        return True

    def describe_endpoint_config(self, name: str) -> dict[str, Any] | None:
        """``DescribeEndpointConfig``; None when absent."""
        try:
            answer = self._call(
                "DescribeEndpointConfig",
                lambda: self._client.describe_endpoint_config(EndpointConfigName=name),
            )
        except ClientError as exc:
            if _is_not_found(exc):
                return None
            raise
        return dict(answer)

    def delete_endpoint_config(self, name: str) -> bool:
        """``DeleteEndpointConfig``. False when it was already gone.

        Raises:
            ResourceBusy: an endpoint still uses it or is being created/updated with it.
        """
        try:
            self._call(
                "DeleteEndpointConfig", lambda: self._client.delete_endpoint_config(EndpointConfigName=name)
            )
        except ClientError as exc:
            if _is_not_found(exc):
                return False
            if _is_busy(exc) or "in use" in error_message(exc).lower():
                raise ResourceBusy(f"endpoint config {name} is still in use: {error_message(exc)}") from exc
            raise
        return True

    def create_endpoint(self, *, name: str, config_name: str, tags: Sequence[Mapping[str, str]]) -> bool:
        """``CreateEndpoint``. False when it already exists."""
        return self._create_once(
            "CreateEndpoint",
            lambda: self._client.create_endpoint(
                EndpointName=name,
                EndpointConfigName=config_name,
                Tags=[dict(tag) for tag in tags],  # type: ignore[misc]
            ),
        )

    def describe_endpoint(self, name: str) -> EndpointInfo | None:
        """``DescribeEndpoint``; None when absent."""
        try:
            answer = self._call("DescribeEndpoint", lambda: self._client.describe_endpoint(EndpointName=name))
        except ClientError as exc:
            if _is_not_found(exc):
                return None
            raise
        return EndpointInfo(
            name=answer["EndpointName"],
            arn=answer["EndpointArn"],
            status=answer["EndpointStatus"],
            failure_reason=answer.get("FailureReason"),
            config_name=answer.get("EndpointConfigName"),
            created=_utc(answer.get("CreationTime")),
            instance_count=_instance_count(answer.get("ProductionVariants") or []),
        )

    def delete_endpoint(self, name: str) -> bool:
        """``DeleteEndpoint``. False when it was already gone.

        Raises:
            ResourceBusy: the endpoint is ``Creating``/``Updating`` or still hosts inference components.
        """
        try:
            self._call("DeleteEndpoint", lambda: self._client.delete_endpoint(EndpointName=name))
        except ClientError as exc:
            if _is_not_found(exc):
                return False
            if _is_busy(exc) or "inference component" in error_message(exc).lower():
                raise ResourceBusy(f"endpoint {name} cannot be deleted now: {error_message(exc)}") from exc
            raise
        return True

    def list_endpoint_names(self, name_contains: str) -> list[tuple[str, str]]:
        """``ListEndpoints`` filtered by ``NameContains``: ``(name, arn)`` pairs, all pages."""
        return [
            (item["EndpointName"], item["EndpointArn"])
            for item in self._pages("ListEndpoints", "Endpoints", NameContains=name_contains)
        ]

    def list_endpoint_config_names(self, name_contains: str) -> list[tuple[str, str]]:
        """``ListEndpointConfigs`` filtered by ``NameContains``: ``(name, arn)`` pairs, all pages."""
        return [
            (item["EndpointConfigName"], item["EndpointConfigArn"])
            for item in self._pages("ListEndpointConfigs", "EndpointConfigs", NameContains=name_contains)
        ]

    # ------------------------------------------------------------------------ inference components

    def create_inference_component(
        self,
        *,
        name: str,
        endpoint_name: str,
        variant_name: str,
        specification: Mapping[str, Any],
        copy_count: int,
        tags: Sequence[Mapping[str, str]],
    ) -> bool:
        """``CreateInferenceComponent`` (``RuntimeConfig.CopyCount`` >= 1). False when it already exists.

        Raises:
            ResourceBusy: the endpoint is not ready for components yet.
            QuotaExceeded: ``ResourceLimitExceeded``.
        """
        try:
            return self._create_once(
                "CreateInferenceComponent",
                lambda: self._client.create_inference_component(
                    InferenceComponentName=name,
                    EndpointName=endpoint_name,
                    VariantName=variant_name,
                    Specification=dict(specification),  # type: ignore[arg-type]
                    RuntimeConfig={"CopyCount": max(1, copy_count)},
                    Tags=[dict(tag) for tag in tags],  # type: ignore[misc]
                ),
            )
        except ClientError as exc:
            if _is_busy(exc):
                raise ResourceBusy(f"endpoint {endpoint_name} is not ready: {error_message(exc)}") from exc
            raise

    def describe_inference_component(self, name: str) -> ComponentInfo | None:
        """``DescribeInferenceComponent``; None when absent."""
        try:
            answer = self._call(
                "DescribeInferenceComponent",
                lambda: self._client.describe_inference_component(InferenceComponentName=name),
            )
        except ClientError as exc:
            if _is_not_found(exc):
                return None
            raise
        return ComponentInfo(
            name=answer["InferenceComponentName"],
            arn=answer["InferenceComponentArn"],
            status=str(answer.get("InferenceComponentStatus", "")),
            endpoint_name=answer["EndpointName"],
            failure_reason=answer.get("FailureReason"),
            desired_copies=answer.get("RuntimeConfig", {}).get("DesiredCopyCount"),
            current_copies=answer.get("RuntimeConfig", {}).get("CurrentCopyCount"),
        )

    def update_inference_component_copies(self, name: str, copies: int) -> None:
        """``UpdateInferenceComponentRuntimeConfig(DesiredRuntimeConfig={"CopyCount": copies})``.

        Raises:
            ResourceBusy: the component is being created, updated or deleted (retry later).
        """
        try:
            self._call(
                "UpdateInferenceComponentRuntimeConfig",
                lambda: self._client.update_inference_component_runtime_config(
                    InferenceComponentName=name, DesiredRuntimeConfig={"CopyCount": copies}
                ),
            )
        except ClientError as exc:
            if _is_busy(exc):
                raise ResourceBusy(f"inference component {name} is busy: {error_message(exc)}") from exc
            raise

    def list_inference_components(
        self, *, endpoint_name: str | None = None, name_contains: str | None = None
    ) -> list[ComponentInfo]:
        """``ListInferenceComponents`` by ``EndpointNameEquals`` and/or ``NameContains``, all pages."""
        filters: dict[str, Any] = {}
        if endpoint_name:
            filters["EndpointNameEquals"] = endpoint_name
        if name_contains:
            filters["NameContains"] = name_contains
        return [
            ComponentInfo(
                name=item["InferenceComponentName"],
                arn=item["InferenceComponentArn"],
                status=str(item.get("InferenceComponentStatus", "")),
                endpoint_name=item["EndpointName"],
            )
            for item in self._pages("ListInferenceComponents", "InferenceComponents", **filters)
        ]

    def delete_inference_component(self, name: str) -> bool:
        """``DeleteInferenceComponent``. False when it was already gone.

        Raises:
            ResourceBusy: the component is being created or updated.
        """
        try:
            self._call(
                "DeleteInferenceComponent",
                lambda: self._client.delete_inference_component(InferenceComponentName=name),
            )
        except ClientError as exc:
            if _is_not_found(exc):
                return False
            if _is_busy(exc):
                raise ResourceBusy(f"inference component {name} is busy: {error_message(exc)}") from exc
            raise
        return True

    # ------------------------------------------------------------------------------ tags, paging

    def resource_tags(self, arn: str) -> dict[str, str] | None:
        """``ListTags`` of ``arn`` as a dict; None only when the resource does not exist.

        Raises:
            AccessDenied: IAM refused ``sagemaker:ListTags`` (never read as "no tags": an ownership check
                that cannot read the owner must not pass).
            RetryableAwsError: throttling/5xx after retries.
            ClientError: any other refusal.
        """
        tags: dict[str, str] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"ResourceArn": arn}
            if token:
                kwargs["NextToken"] = token
            try:
                page = self._call("ListTags", lambda kw=kwargs: self._client.list_tags(**kw))  # type: ignore[misc]
            except ClientError as exc:
                if _is_not_found(exc):
                    return None
                raise
            tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
            token = page.get("NextToken")
            if not token:
                return tags

    def _pages(self, operation: str, key: str, **filters: Any) -> Iterator[dict[str, Any]]:
        method = getattr(self._client, _snake(operation))
        token: str | None = None
        while True:
            kwargs = dict(filters, MaxResults=100)
            if token:
                kwargs["NextToken"] = token
            page = self._call(operation, lambda kw=kwargs: method(**kw))  # type: ignore[misc]
            yield from page.get(key, [])
            token = page.get("NextToken")
            if not token:
                return


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


def _instance_count(variants: list[Any]) -> int | None:
    """``CurrentInstanceCount`` summed over the variants, None when no variant reports it."""
    counts = [v["CurrentInstanceCount"] for v in variants if isinstance(v.get("CurrentInstanceCount"), int)]
    return sum(counts) if counts else None
