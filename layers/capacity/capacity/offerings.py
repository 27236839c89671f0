"""Offerings: what AWS sells for a request (training plan and capacity block offerings, normalised to USD)
and the extension offerings of a reservation in place."""

from __future__ import annotations

from pydantic import ConfigDict

from capacity.base import Model
from capacity.wire import Money, UtcDatetime


class OfferingSummary(Model):
    """The offering fields the workflow passes between steps (choose -> approval -> purchase)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    offering_id: str
    region: str
    availability_zone: str
    instance_type: str
    instance_count: int
    start_time: UtcDatetime
    end_time: UtcDatetime
    duration_hours: int
    upfront_fee_usd: Money


class Offering(OfferingSummary):
    """A training plan offering normalised for comparison (one per ``TrainingPlanOfferingId``).

    Money in USD: ``upfront_fee_usd`` (AWS ``UpfrontFee``), ``usd_per_instance_hour`` (fee over
    reserved instance-hours), ``on_demand_usd_per_hour`` (per instance, :mod:`capacity.pricing`),
    ``on_demand_equivalent_usd`` (same instance-hours on demand), ``saving_percent`` and
    ``break_even_utilisation`` (fraction of the time the capacity must be used to beat on-demand).
    ``feasible`` says whether it satisfies the request (window, duration, count); if not,
    ``infeasible_reason`` says why (it is then an *alternative* to show). ``searched_duration_hours``
    and ``searched_count`` record the search that returned it.
    """

    currency: str = "USD"
    usd_per_instance_hour: Money
    on_demand_usd_per_hour: Money | None = None
    on_demand_equivalent_usd: Money | None = None
    saving_percent: Money | None = None
    break_even_utilisation: Money | None = None
    searched_duration_hours: int
    searched_count: int
    feasible: bool
    infeasible_reason: str | None = None

    @property
    def key(self) -> str:
        """Sort key in OFFERINGS_TABLE: region, duration, count and id (unique per search)."""
        return (
            f"{self.region}#{self.searched_duration_hours:05d}#{self.searched_count:02d}#{self.offering_id}"
        )

    def summary(self) -> OfferingSummary:
        """The small form passed through the state machine."""
        return OfferingSummary.model_validate(self.model_dump())


class ExtensionOffering(Model):
    """One way to extend a reservation in place (``TrainingPlanExtensionOfferings`` of
    ``SearchTrainingPlanOfferings(TrainingPlanArn)``, ``DescribeCapacityBlockExtensionOfferings``).

    ``start_time`` is the reservation's current end, ``end_time`` its end once extended (UTC);
    ``upfront_fee_usd`` the extension's fee (USD); ``on_demand_equivalent_usd`` the same instance-hours on
    demand (None when the price is unknown).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    offering_id: str
    region: str
    availability_zone: str | None = None
    start_time: UtcDatetime
    end_time: UtcDatetime
    duration_hours: int
    upfront_fee_usd: Money
    on_demand_equivalent_usd: Money | None = None
