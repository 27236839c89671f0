"""The ``PURCHASE`` ledger item (:data:`capacity.record_kinds.PURCHASE`): one model per kind of purchase, each
with its platform's own names (issue 28).

- :class:`TrainingPlanPurchase` (``training-plan``): a SageMaker training plan bought (``CreateTrainingPlan``)
  or brought (issue 17);
- :class:`CapacityBlockPurchase` (``capacity-block``): an EC2 Capacity Block for ML bought
  (``PurchaseCapacityBlock``) or brought;
- :class:`OnDemandEndpointPurchase` (``on-demand-endpoint``): a SageMaker endpoint run on demand, no plan;
- :class:`OnDemandInstancesPurchase` (``on-demand-instances``): EC2 instances run on demand or on spot.

Written once per request (:func:`capacity.logic.steps.buy_once.record_purchase`,
:func:`capacity.logic.steps.on_demand_record.put_purchase`) as :meth:`_Purchase.to_item`, and read through
:func:`parse_purchase`. Money is USD (a decimal string in the item), times are UTC (``YYYY-MM-DDTHH:MM:SSZ``),
``instance_count`` counts instances.

Items recorded before the kinds existed (no ``kind``) still read: the kind follows from ``platform`` (default
``sagemaker``) and ``market`` (default ``reserved``), and their generic names map onto the kind's own: a
capacity block's ``training_plan_arn``/``training_plan_name`` are its ``capacity_reservation_arn`` and
``capacity_reservation_id``; the empty ``training_plan_*``, ``capacity_reservation_id`` and
``availability_zone`` an on-demand item carried are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, TypeAdapter, model_validator

from capacity.base import Model
from capacity.platforms import platform
from capacity.wire import Money, UtcDatetime

PurchaseKind = Literal["training-plan", "capacity-block", "on-demand-endpoint", "on-demand-instances"]
"""The ``kind`` of a ``PURCHASE`` item."""


IDENTIFIERS = (
    "training_plan_arn",
    "training_plan_name",
    "capacity_reservation_arn",
    "capacity_reservation_id",
    "availability_zone",
)
"""The fields that name what was bought, each kind its own (a training plan's, a capacity block's)."""


class _Purchase(Model):
    """What every kind records. Other attributes of the item (the ledger's ``request_id``, ``sk``,
    ``write_id``, ``written_at``) are the ledger's and are not part of the model."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    actor: str = ""
    """The function that recorded it (the ledger's actor)."""
    region: str
    """The AWS Region the capacity is in."""
    start_time: UtcDatetime
    """When the capacity starts (UTC)."""
    end_time: UtcDatetime
    """When it ends (UTC), before any extension in place (``EXTENDED`` entries move it)."""
    upfront_fee_usd: Money
    """The fee paid upfront (USD): 0 on demand and for a brought reservation."""
    instance_type: str = ""
    """The request's instance type (``ml.p5.48xlarge``, ``p5.48xlarge``)."""
    instance_count: int = 0
    """The request's instance count."""
    brought: bool = False
    """True: someone else bought the reservation (issue 17); ``upfront_fee_usd`` is 0 for this request. Never
    on demand."""

    @property
    def arn(self) -> str:
        """The ARN of the reservation bought (the training plan's, the capacity reservation's); empty for
        capacity run on demand (``ReservationPurchased``/``ReservationReleased`` name it as their
        resource)."""
        return ""

    @property
    def name(self) -> str:
        """What a person calls the reservation bought (the plan's name, the block's id); empty on demand."""
        return ""

    def identifiers(self) -> dict[str, str]:
        """The reservation in its platform's own names (:data:`IDENTIFIERS`; none on demand)."""
        return {key: str(value) for key, value in self.model_dump(include=set(IDENTIFIERS)).items()}

    def to_item(self) -> dict[str, Any]:
        """The item's attributes (JSON-safe: money a decimal string, times ``YYYY-MM-DDTHH:MM:SSZ``; a field
        that is None is left out)."""
        return self.model_dump(mode="json", exclude_none=True)


class _Reserved(_Purchase):
    """A reservation bought upfront (or brought): a training plan or a capacity block."""

    market: Literal["reserved"] = "reserved"
    """Reserved capacity (as opposed to ``on-demand``/``spot``)."""
    offering_id: str = ""
    """The offering bought (``TrainingPlanOfferingId``, ``CapacityBlockOfferingId``); ``brought`` for a
    brought reservation."""
    re_searched: bool = False
    """True when the chosen offering had expired and a fresh search's replacement was bought."""


class TrainingPlanPurchase(_Reserved):
    """A SageMaker training plan (``platform`` ``sagemaker``): ``CreateTrainingPlan`` then
    ``DescribeTrainingPlan`` (``StartTime``, ``EndTime``, ``UpfrontFee`` in USD; the offering's when AWS does
    not say), or the plan a request brought."""

    kind: Literal["training-plan"] = "training-plan"
    platform: Literal["sagemaker"] = "sagemaker"
    training_plan_arn: str
    """``TrainingPlanArn``."""
    training_plan_name: str
    """``TrainingPlanName`` (:func:`capacity.naming.training_plan_name` for a plan bought here)."""

    @property
    def arn(self) -> str:
        """The training plan's ARN."""
        return self.training_plan_arn

    @property
    def name(self) -> str:
        """The training plan's name."""
        return self.training_plan_name


class CapacityBlockPurchase(_Reserved):
    """An EC2 Capacity Block for ML (``platform`` ``ec2``): ``PurchaseCapacityBlock`` (or the request-id
    tag's ``DescribeCapacityReservations``) answers the reservation's ``StartDate``, ``EndDate`` and zone; its
    fee is the offering's ``UpfrontFee`` (USD: a capacity reservation does not carry it); or the block a
    request brought."""

    kind: Literal["capacity-block"] = "capacity-block"
    platform: Literal["ec2"] = "ec2"
    capacity_reservation_arn: str
    """``CapacityReservationArn``."""
    capacity_reservation_id: str
    """``CapacityReservationId`` (``cr-...``): what instances launch into and extensions name."""
    availability_zone: str = ""
    """``AvailabilityZone`` of the reservation (else the offering's)."""

    @model_validator(mode="before")
    @classmethod
    def _from_generic_names(cls, data: Any) -> Any:
        """An item recorded before the kinds existed named the block in the training plan fields."""
        if not isinstance(data, Mapping) or data.get("kind"):
            return data
        return {
            **data,
            "capacity_reservation_arn": data.get("capacity_reservation_arn") or data.get("training_plan_arn"),
            "capacity_reservation_id": data.get("capacity_reservation_id") or data.get("training_plan_name"),
        }

    @property
    def arn(self) -> str:
        """The capacity reservation's ARN."""
        return self.capacity_reservation_arn

    @property
    def name(self) -> str:
        """The capacity reservation's id (``cr-...``)."""
        return self.capacity_reservation_id


class _OnDemand(_Purchase):
    """Capacity run on demand, paid by the hour: no fee upfront (``upfront_fee_usd`` 0); ``start_time`` is the
    launch, ``end_time`` the request's ``latest_end``."""

    on_demand_usd_per_hour: Money | None = None
    """The on-demand list price in ``region`` (USD per instance-hour, :mod:`capacity.pricing`); None when
    the price list does not know the type."""
    timed_out: str | None = None
    """Why the tries gave up (a deadline passed) with capacity left in ``region`` for the release to delete;
    None when it runs."""


class OnDemandEndpointPurchase(_OnDemand):
    """A SageMaker endpoint run on demand (``platform`` ``sagemaker``, ``CreateEndpoint`` without
    ``CapacityReservationConfig``): named after the request (:func:`capacity.naming.endpoint_name`)."""

    kind: Literal["on-demand-endpoint"] = "on-demand-endpoint"
    platform: Literal["sagemaker"] = "sagemaker"
    market: Literal["on-demand"] = "on-demand"


class OnDemandInstancesPurchase(_OnDemand):
    """EC2 instances run on demand or on spot (``platform`` ``ec2``, ``RunInstances`` from the request's
    launch template)."""

    kind: Literal["on-demand-instances"] = "on-demand-instances"
    platform: Literal["ec2"] = "ec2"
    market: Literal["on-demand", "spot"] = "on-demand"
    instance_ids: list[str] = Field(default_factory=list)
    """The ``InstanceId`` s ``RunInstances`` answered."""


ReservedPurchase = TrainingPlanPurchase | CapacityBlockPurchase
"""A reservation bought upfront (or brought)."""
PurchaseRecord = (
    TrainingPlanPurchase | CapacityBlockPurchase | OnDemandEndpointPurchase | OnDemandInstancesPurchase
)
"""Any ``PURCHASE`` item."""


def purchase_kind(item: Any) -> str:
    """The kind of a ``PURCHASE`` item (or model): its ``kind``, else (an item recorded before the kinds) the
    one its ``platform`` and ``market`` name."""
    if not isinstance(item, Mapping):
        return str(getattr(item, "kind", ""))
    if item.get("kind"):
        return str(item["kind"])
    return platform(item.get("platform")).kind(item.get("market") or "reserved")


_Record = Annotated[
    Annotated[TrainingPlanPurchase, Tag("training-plan")]
    | Annotated[CapacityBlockPurchase, Tag("capacity-block")]
    | Annotated[OnDemandEndpointPurchase, Tag("on-demand-endpoint")]
    | Annotated[OnDemandInstancesPurchase, Tag("on-demand-instances")],
    Discriminator(purchase_kind),
]


@cache
def _adapter() -> TypeAdapter[PurchaseRecord]:
    return TypeAdapter(_Record)


def parse_purchase(item: Mapping[str, Any]) -> PurchaseRecord:
    """The model of a ``PURCHASE`` item as the ledger stored it (any kind, recorded before the kinds or
    after).

    Raises:
        pydantic.ValidationError: the item is not a purchase of any kind.
    """
    return _adapter().validate_python(dict(item))


def parse_reserved(item: Mapping[str, Any]) -> ReservedPurchase:
    """:func:`parse_purchase` of a reservation bought upfront or brought (a training plan, a capacity block).

    Raises:
        ValueError: the item is capacity run on demand (pydantic's ``ValidationError``: not a purchase).
    """
    record = parse_purchase(item)
    if not isinstance(record, TrainingPlanPurchase | CapacityBlockPurchase):
        raise ValueError(f"the purchase is {record.kind}, not a reservation")  # noqa: TRY004 - a value
    return record
