"""EC2 adapter: Capacity Blocks for ML (offerings, purchase, reservations) and the instances run in them.

Over 400 lines: one adapter per AWS service (capacity blocks and the instances in them).

Shapes follow the botocore EC2 model installed with the layer and the EC2 API reference
(``DescribeCapacityBlockOfferings``, ``PurchaseCapacityBlock``, ``DescribeCapacityReservations``,
``RunInstances``, ``DescribeInstances``, ``TerminateInstances``, ``DescribeLaunchTemplateVersions``).
``ClientError`` codes become domain errors:

======================================================== ===========================================
throttling / 5xx / timeouts (after retries)               :class:`~capacity.errors.RetryableAwsError`
``InsufficientInstanceCapacity`` / ``InsufficientCapacity`` :class:`~capacity.errors.CapacityUnavailable`
``*LimitExceeded`` (quotas)                              :class:`~capacity.errors.QuotaExceeded`
``InvalidParameterValue`` naming the offering on purchase :class:`~capacity.errors.OfferingExpired`
``InvalidCapacityReservationId.NotFound``                 ``describe_capacity_reservation`` returns None
======================================================== ===========================================

``PurchaseCapacityBlock`` takes no client token and cannot be undone, so it is sent by a client **without
botocore retries**: a timeout after AWS committed must reach the caller, which looks the block up by its
tag before anything else (a silent retry would buy a second block). ``RunInstances`` carries a client
token, so retrying it is safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from botocore.exceptions import ClientError

from capacity import TAG_REQUEST_ID
from capacity.adapters import clients
from capacity.adapters.clients import DEFAULT_TIMEOUTS, error_code, error_message
from capacity.errors import CapacityError, CapacityUnavailable, OfferingExpired, PurchaseFailed, QuotaExceeded
from capacity.resources import CapacityReservation, Extension, Instance
from capacity.timeutil import as_utc

_CAPACITY_CODES = frozenset(
    {"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity"}
)
UPCOMING_RESERVATION_STATES = ("payment-pending", "scheduled", "active")
"""Capacity reservation states of a block that has not ended (its EC2 events are still to come)."""


_BLOCK_PAYMENT = {"payment-pending": "pending", "payment-succeeded": "paid", "payment-failed": "failed"}


def _block_extension(item: Mapping[str, Any]) -> Extension:
    """A ``CapacityBlockExtension`` as an :class:`Extension` (unknown status: ``pending``)."""
    return Extension(
        offering_id=str(item["CapacityBlockExtensionOfferingId"]),
        start_time=as_utc(item["CapacityBlockExtensionStartDate"]),
        end_time=as_utc(item["CapacityBlockExtensionEndDate"]),
        duration_hours=int(item.get("CapacityBlockExtensionDurationHours") or 0),
        upfront_fee_usd=Decimal(str(item.get("UpfrontFee") or "0")),
        availability_zone=item.get("AvailabilityZone"),
        status=_BLOCK_PAYMENT.get(str(item.get("CapacityBlockExtensionStatus")), "pending"),
    )


@dataclass(frozen=True)
class LaunchTemplateVersion:
    """``DescribeLaunchTemplateVersions`` essentials of the version a request names: the template's id and
    name, the version number, and the instance profile its instances get (``IamInstanceProfile``: its
    name, or the ARN when the template names it by ARN; None without one)."""

    template_id: str
    template_name: str
    version: int
    instance_profile: str | None


_TEMPLATE_GONE = frozenset(
    {
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.VersionNotFound",
        "InvalidLaunchTemplateId.Malformed",
    }
)


def _utc(value: Any) -> datetime | None:
    return as_utc(value) if isinstance(value, datetime) else None


def _reservation(data: Mapping[str, Any]) -> CapacityReservation:
    return CapacityReservation(
        reservation_id=str(data["CapacityReservationId"]),
        arn=str(data.get("CapacityReservationArn", "")),
        state=str(data.get("State", "")),
        instance_type=str(data.get("InstanceType", "")),
        availability_zone=str(data.get("AvailabilityZone", "")),
        total_instance_count=int(data.get("TotalInstanceCount") or 0),
        available_instance_count=int(data.get("AvailableInstanceCount") or 0),
        start_time=_utc(data.get("StartDate")),
        end_time=_utc(data.get("EndDate")),
        tags={str(t["Key"]): str(t.get("Value", "")) for t in data.get("Tags") or []},
    )


def fee(text: Any) -> Decimal | None:
    """An ``UpfrontFee`` string as USD, or None when absent or unparsable."""
    try:
        return Decimal(str(text)) if text not in (None, "") else None
    except InvalidOperation:
        return None


class Ec2Adapter:
    """EC2 calls for one region, with AWS errors translated into domain errors.

    Args:
        region: the AWS region (capacity blocks and instances are regional).
        client: an EC2 client; default the cached one of :mod:`capacity.adapters.clients`.
        purchase_client: the client ``PurchaseCapacityBlock`` goes through; default one without retries.
    """

    def __init__(self, region: str, client: Any = None, purchase_client: Any = None) -> None:
        self.region = region
        self._client = client or clients.client("ec2", region)
        self._purchase_client = purchase_client

    def _call[T](self, operation: str, function: Callable[[], T]) -> T:
        def verdict(exc: ClientError) -> CapacityError | None:
            code = error_code(exc)
            # EC2 answers InsufficientInstanceCapacity with HTTP 500: a capacity verdict, not a transient one.
            if code in _CAPACITY_CODES:
                return CapacityUnavailable(f"{operation} in {self.region}: {error_message(exc)}")
            if code.endswith("LimitExceeded") and code != "RequestLimitExceeded":  # that one is throttling
                return QuotaExceeded(f"{operation} in {self.region}: {code}: {error_message(exc)}")
            return None

        return clients.call(f"EC2 {operation} ({self.region})", function, specific=verdict)

    def _every(self, operation: str, method: Callable[..., Any], key: str, **kwargs: Any) -> list[Any]:
        """The ``key`` items of every page of ``operation`` (``NextToken`` followed; each page one
        :meth:`_call`, so errors are translated the same way)."""
        found: list[Any] = []
        token: str | None = None
        while True:
            paged = {**kwargs, "NextToken": token} if token else kwargs
            page = self._call(operation, lambda kw=paged: method(**kw))  # type: ignore[misc]
            found.extend(page.get(key, []))
            token = page.get("NextToken")
            if not token:
                return found

    # ------------------------------------------------------------------------------ capacity blocks

    def describe_capacity_block_offerings(
        self,
        *,
        instance_type: str,
        instance_count: int,
        start_after: datetime,
        end_before: datetime,
        duration_hours: int,
    ) -> list[dict[str, Any]]:
        """``DescribeCapacityBlockOfferings``, every page (``NextToken``) followed.

        Returns:
            The ``CapacityBlockOfferings`` items as botocore parsed them (``UpfrontFee`` a string).

        Raises:
            CapacityUnavailable: ``InsufficientInstanceCapacity``.
            RetryableAwsError: throttling/5xx after retries.
        """
        items = self._every(
            "DescribeCapacityBlockOfferings",
            self._client.describe_capacity_block_offerings,
            "CapacityBlockOfferings",
            InstanceType=instance_type,
            InstanceCount=instance_count,
            StartDateRange=start_after,
            EndDateRange=end_before,
            CapacityDurationHours=duration_hours,
        )
        return [dict(item) for item in items]

    def purchase_capacity_block(
        self, *, offering_id: str, tags: Sequence[Mapping[str, str]], platform: str = "Linux/UNIX"
    ) -> CapacityReservation:
        """``PurchaseCapacityBlock`` once (no botocore retry), the reservation tagged with ``tags``.

        Raises:
            OfferingExpired: ``InvalidParameterValue`` about the offering (expired, taken or unknown).
            CapacityUnavailable: ``InsufficientInstanceCapacity``.
            QuotaExceeded: a ``*LimitExceeded`` quota.
            PurchaseFailed: any other rejection.
            RetryableAwsError: throttling/5xx/timeout: the block **may** have been bought; look it up.
        """
        # The first attempt only: no client token, so a botocore retry could buy a second block.
        client = self._purchase_client or clients.client("ec2", self.region, DEFAULT_TIMEOUTS.single())
        try:
            answer = self._call(
                "PurchaseCapacityBlock",
                lambda: client.purchase_capacity_block(
                    CapacityBlockOfferingId=offering_id,
                    InstancePlatform=platform,
                    TagSpecifications=[
                        {"ResourceType": "capacity-reservation", "Tags": [dict(tag) for tag in tags]}
                    ],
                ),
            )
        except ClientError as exc:
            code, message = error_code(exc), error_message(exc)
            if code == "InvalidParameterValue" and "offering" in message.lower():
                raise OfferingExpired(f"offering {offering_id} can no longer be bought: {message}") from exc
            raise PurchaseFailed(f"PurchaseCapacityBlock in {self.region} failed: {code}: {message}") from exc
        return _reservation(answer["CapacityReservation"])

    def describe_block_extension_offerings(self, reservation_id: str, hours: int) -> list[Extension]:
        """``DescribeCapacityBlockExtensionOfferings`` (every page; ``status`` ``offered``). Raises
        ``ClientError`` when the block cannot be extended (the message says why)."""
        items = self._every(
            "DescribeCapacityBlockExtensionOfferings",
            self._client.describe_capacity_block_extension_offerings,
            "CapacityBlockExtensionOfferings",
            CapacityReservationId=reservation_id,
            CapacityBlockExtensionDurationHours=hours,
        )
        return [
            Extension(
                offering_id=str(item["CapacityBlockExtensionOfferingId"]),
                start_time=as_utc(item["CapacityBlockExtensionStartDate"]),
                end_time=as_utc(item["CapacityBlockExtensionEndDate"]),
                duration_hours=int(item.get("CapacityBlockExtensionDurationHours") or 0),
                upfront_fee_usd=Decimal(str(item.get("UpfrontFee") or "0")),
                availability_zone=item.get("AvailabilityZone"),
                status="offered",
            )
            for item in items
        ]

    def purchase_block_extension(self, *, offering_id: str, reservation_id: str) -> Extension:
        """``PurchaseCapacityBlockExtension`` once (no botocore retry: no client token).

        Raises:
            OfferingExpired: ``InvalidParameterValue`` about the offering.
            CapacityUnavailable: ``InsufficientInstanceCapacity``.
            PurchaseFailed: any other rejection.
            RetryableAwsError: throttling/5xx/timeout: it **may** have been bought; look the history up.
        """
        client = self._purchase_client or clients.client("ec2", self.region, DEFAULT_TIMEOUTS.single())
        try:
            answer = self._call(
                "PurchaseCapacityBlockExtension",
                lambda: client.purchase_capacity_block_extension(
                    CapacityBlockExtensionOfferingId=offering_id, CapacityReservationId=reservation_id
                ),
            )
        except ClientError as exc:
            code, message = error_code(exc), error_message(exc)
            if code == "InvalidParameterValue" and "offering" in message.lower():
                raise OfferingExpired(
                    f"extension offering {offering_id} can no longer be bought: {message}"
                ) from exc
            raise PurchaseFailed(
                f"PurchaseCapacityBlockExtension in {self.region} failed: {code}: {message}"
            ) from exc
        items = answer.get("CapacityBlockExtensions") or []
        if not items:
            raise PurchaseFailed(f"PurchaseCapacityBlockExtension {offering_id} answered no extension")
        return _block_extension(items[0])

    def block_extension_history(self, reservation_id: str) -> list[Extension]:
        """``DescribeCapacityBlockExtensionHistory`` of one block (every page), oldest first."""
        items = self._every(
            "DescribeCapacityBlockExtensionHistory",
            self._client.describe_capacity_block_extension_history,
            "CapacityBlockExtensions",
            CapacityReservationIds=[reservation_id],
        )
        return [_block_extension(item) for item in items]

    def describe_capacity_reservation(self, reservation_id: str) -> CapacityReservation | None:
        """``DescribeCapacityReservations`` of one id; None when it does not exist."""
        try:
            answer = self._call(
                "DescribeCapacityReservations",
                lambda: self._client.describe_capacity_reservations(CapacityReservationIds=[reservation_id]),
            )
        except ClientError as exc:
            if error_code(exc) == "InvalidCapacityReservationId.NotFound":
                return None
            raise
        items = answer.get("CapacityReservations", [])
        return _reservation(items[0]) if items else None

    def find_capacity_reservations(self, request_id: str) -> list[CapacityReservation]:
        """Reservations tagged ``capacity-orchestrator:request-id`` = ``request_id`` (every page)."""
        items = self._every(
            "DescribeCapacityReservations",
            self._client.describe_capacity_reservations,
            "CapacityReservations",
            Filters=[{"Name": f"tag:{TAG_REQUEST_ID}", "Values": [request_id]}],
        )
        return [_reservation(item) for item in items]

    def tagged_capacity_reservations(self) -> list[CapacityReservation]:
        """Reservations carrying the ``capacity-orchestrator:request-id`` tag (any request) that are still
        to come or running (``payment-pending``, ``scheduled``, ``active``), every page."""
        items = self._every(
            "DescribeCapacityReservations",
            self._client.describe_capacity_reservations,
            "CapacityReservations",
            Filters=[
                {"Name": "tag-key", "Values": [TAG_REQUEST_ID]},
                {"Name": "state", "Values": list(UPCOMING_RESERVATION_STATES)},
            ],
        )
        return [_reservation(item) for item in items]

    # ------------------------------------------------------------------------------ instances

    def run_instances(
        self,
        *,
        count: int,
        instance_type: str,
        launch_template: Mapping[str, str] | None,
        client_token: str,
        tags: Sequence[Mapping[str, str]],
        capacity_reservation_id: str | None = None,
        market_type: str | None = None,
    ) -> list[str]:
        """``RunInstances`` of exactly ``count`` instances (``MinCount = MaxCount``); the ids launched.

        ``capacity_reservation_id`` with ``market_type`` ``capacity-block`` launches into a capacity block
        (``InstanceMarketOptions.MarketType`` and
        ``CapacityReservationSpecification.CapacityReservationTarget``; EC2 user guide "Launch instances
        into a Capacity Block"); ``market_type`` ``spot`` asks for spot. ``client_token`` makes a retried
        launch return the first launch's instances (idempotent).

        Raises:
            CapacityUnavailable: ``InsufficientInstanceCapacity``.
            QuotaExceeded: an instance limit.
            RetryableAwsError: throttling/5xx after retries.
        """
        kwargs: dict[str, Any] = {
            "MinCount": count,
            "MaxCount": count,
            "InstanceType": instance_type,
            "ClientToken": client_token,
            "TagSpecifications": [{"ResourceType": "instance", "Tags": [dict(tag) for tag in tags]}],
        }
        if launch_template:
            kwargs["LaunchTemplate"] = dict(launch_template)
        if market_type:
            kwargs["InstanceMarketOptions"] = {"MarketType": market_type}
        if capacity_reservation_id:
            kwargs["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": capacity_reservation_id}
            }
        answer = self._call("RunInstances", lambda: self._client.run_instances(**kwargs))
        return [str(item["InstanceId"]) for item in answer.get("Instances", [])]

    def launch_template_version(self, launch_template: Mapping[str, str]) -> LaunchTemplateVersion | None:
        """The version ``launch_template`` names (``RunInstances``' ``LaunchTemplate``: ``LaunchTemplateId``
        or ``LaunchTemplateName``, and ``Version``: a number, ``$Latest`` or ``$Default``), read with
        ``DescribeLaunchTemplateVersions``; None when the template or that version does not exist in this
        region (launch templates are regional).

        Raises:
            RetryableAwsError: throttling/5xx after retries.
        """
        kwargs = {key: value for key, value in launch_template.items() if key != "Version"}
        kwargs["Versions"] = [launch_template.get("Version") or "$Default"]  # type: ignore[assignment]
        try:
            answer = self._call(
                "DescribeLaunchTemplateVersions",
                lambda: self._client.describe_launch_template_versions(**kwargs),
            )
        except ClientError as exc:
            if error_code(exc) in _TEMPLATE_GONE:
                return None
            raise
        versions = answer.get("LaunchTemplateVersions") or []
        if not versions:
            return None
        found = versions[0]
        profile = (found.get("LaunchTemplateData") or {}).get("IamInstanceProfile") or {}
        return LaunchTemplateVersion(
            template_id=str(found.get("LaunchTemplateId", "")),
            template_name=str(found.get("LaunchTemplateName", "")),
            version=int(found.get("VersionNumber") or 0),
            instance_profile=profile.get("Name") or profile.get("Arn") or None,
        )

    def find_instances(self, request_id: str) -> list[Instance]:
        """Instances tagged ``capacity-orchestrator:request-id`` = ``request_id`` (any state, every page)."""
        reservations = self._every(
            "DescribeInstances",
            self._client.describe_instances,
            "Reservations",
            Filters=[{"Name": f"tag:{TAG_REQUEST_ID}", "Values": [request_id]}],
        )
        return [
            Instance(
                instance_id=str(item["InstanceId"]),
                state=str((item.get("State") or {}).get("Name", "")),
                instance_type=str(item.get("InstanceType", "")),
                availability_zone=(item.get("Placement") or {}).get("AvailabilityZone"),
                capacity_reservation_id=item.get("CapacityReservationId") or None,
            )
            for reservation in reservations
            for item in reservation.get("Instances", [])
        ]

    def terminate_instances(self, instance_ids: Sequence[str]) -> None:
        """``TerminateInstances`` (idempotent: terminating a terminated instance is accepted).

        ``InvalidInstanceID.NotFound`` (an instance just launched is not known yet: EC2's eventual
        consistency) fails the whole call, so the ids are then terminated one by one and the unknown ones
        skipped: the caller polls and terminates them once they are known.
        """
        ids = list(instance_ids)
        try:
            self._terminate(ids)
        except ClientError as exc:
            if error_code(exc) != "InvalidInstanceID.NotFound":
                raise
            for one in ids if len(ids) > 1 else []:
                try:
                    self._terminate([one])
                except ClientError as each:
                    if error_code(each) != "InvalidInstanceID.NotFound":
                        raise

    def _terminate(self, instance_ids: list[str]) -> None:
        if instance_ids:
            self._call(
                "TerminateInstances",
                lambda: self._client.terminate_instances(InstanceIds=instance_ids),
            )
