"""Normalise training plan offerings and rank them (pure functions, no I/O).

Input: ``TrainingPlanOfferings[]`` items of ``SearchTrainingPlanOfferings`` as botocore parses them
(``UpfrontFee`` a string, ``ReservedCapacityOfferings[]`` with ``InstanceType``, ``InstanceCount``,
``AvailabilityZone``, ``StartTime``, ``EndTime``: AWS SageMaker API reference and the installed botocore
model). Output: :class:`~capacity.offerings.Offering` objects with USD figures and a feasibility verdict.

Ranking (issue 3): feasible for the window and count first, then lowest upfront fee, then earliest start,
then the request's region preference (then the offering id, so the order is total and repeatable).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from capacity.offerings import Offering, OfferingSummary
from capacity.pricing import (
    break_even_utilisation,
    on_demand_equivalent,
    on_demand_usd_per_hour,
    saving_percent,
    usd_per_instance_hour,
)
from capacity.request import ReservationRequest
from capacity.timeutil import as_utc, iso_z


def _segments(raw: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        seg
        for seg in raw.get("ReservedCapacityOfferings") or []
        if isinstance(seg.get("StartTime"), datetime) and isinstance(seg.get("EndTime"), datetime)
    ]


def normalise_offering(
    raw: Mapping[str, Any],
    *,
    region: str,
    request: ReservationRequest,
    searched_duration_hours: int,
    searched_count: int,
) -> Offering | None:
    """One AWS offering as an :class:`Offering`, or None when it cannot be compared.

    Skipped (None): a currency other than USD, an unparsable ``UpfrontFee``, or no reserved capacity
    segment with start and end times. With several segments (AWS returns up to 5), start is the earliest,
    end the latest, zones are joined with ``,`` and the instance count is their sum when they cover the
    same period (split across zones) or the smallest count when they follow each other.
    """
    fee = _usd_fee(raw)
    segments = _segments(raw)
    if fee is None or not segments:
        return None
    start = min(as_utc(seg["StartTime"]) for seg in segments)
    end = max(as_utc(seg["EndTime"]) for seg in segments)
    same_period = len({(seg["StartTime"], seg["EndTime"]) for seg in segments}) == 1
    counts = [int(seg.get("InstanceCount", 0)) for seg in segments]
    count = sum(counts) if same_period else min(counts)
    instance_type = str(segments[0].get("InstanceType", request.instance_type))
    zones = sorted({str(seg["AvailabilityZone"]) for seg in segments if seg.get("AvailabilityZone")})
    duration_hours = int(raw.get("DurationHours") or round((end - start).total_seconds() / 3600))
    hours = Decimal(duration_hours) + Decimal(int(raw.get("DurationMinutes") or 0)) / 60
    if count <= 0 or hours <= 0:
        return None
    return _offering(
        str(raw["TrainingPlanOfferingId"]),
        region=region,
        availability_zone=",".join(zones) or region,
        instance_type=instance_type,
        count=count,
        start=start,
        end=end,
        duration_hours=duration_hours,
        hours=hours,
        fee=fee,
        request=request,
        searched_duration_hours=searched_duration_hours,
        searched_count=searched_count,
    )


def normalise_block_offering(
    raw: Mapping[str, Any],
    *,
    region: str,
    request: ReservationRequest,
    searched_duration_hours: int,
    searched_count: int,
) -> Offering | None:
    """One EC2 capacity block offering (``DescribeCapacityBlockOfferings`` item: ``CapacityBlockOfferingId``,
    ``InstanceType``, ``AvailabilityZone``, ``InstanceCount``, ``StartDate``, ``EndDate``,
    ``CapacityBlockDurationHours``, ``UpfrontFee`` string, ``CurrencyCode``) as an :class:`Offering`, with
    the same USD figures and feasibility rules as a training plan offering; None when it cannot be
    compared (not USD, no fee, no dates, no instances).
    """
    fee = _usd_fee(raw)
    start, end = raw.get("StartDate"), raw.get("EndDate")
    if fee is None or not isinstance(start, datetime) or not isinstance(end, datetime):
        return None
    start, end = as_utc(start), as_utc(end)
    count = int(raw.get("InstanceCount") or 0)
    duration_hours = int(raw.get("CapacityBlockDurationHours") or round((end - start).total_seconds() / 3600))
    hours = Decimal(duration_hours) + Decimal(int(raw.get("CapacityBlockDurationMinutes") or 0)) / 60
    if count <= 0 or hours <= 0:
        return None
    instance_type = str(raw.get("InstanceType") or request.instance_type)
    return _offering(
        str(raw["CapacityBlockOfferingId"]),
        region=region,
        availability_zone=str(raw.get("AvailabilityZone") or region),
        instance_type=instance_type,
        count=count,
        start=start,
        end=end,
        duration_hours=duration_hours,
        hours=hours,
        fee=fee,
        request=request,
        searched_duration_hours=searched_duration_hours,
        searched_count=searched_count,
    )


def _usd_fee(raw: Mapping[str, Any]) -> Decimal | None:
    """The offering's ``UpfrontFee`` (a string, maybe with thousands commas) in USD; None when the
    ``CurrencyCode`` is not USD or the fee is not a finite number."""
    if (raw.get("CurrencyCode") or "USD") != "USD":
        return None
    try:
        fee = Decimal(str(raw.get("UpfrontFee", "")).replace(",", ""))
    except InvalidOperation:
        return None
    return fee if fee.is_finite() else None


def _offering(
    offering_id: str,
    *,
    region: str,
    availability_zone: str,
    instance_type: str,
    count: int,
    start: datetime,
    end: datetime,
    duration_hours: int,
    hours: Decimal,
    fee: Decimal,
    request: ReservationRequest,
    searched_duration_hours: int,
    searched_count: int,
) -> Offering:
    """An :class:`Offering` with the USD figures (on-demand equivalent of ``count`` x ``hours``, saving,
    break-even) and the feasibility verdict shared by training plan and capacity block offerings."""
    rate = on_demand_usd_per_hour(region, instance_type)
    equivalent = on_demand_equivalent(rate, instance_count=count, hours=hours) if rate is not None else None
    reasons = _infeasible_reasons(
        request, instance_type=instance_type, count=count, duration_hours=duration_hours, start=start, end=end
    )
    return Offering(
        offering_id=offering_id,
        region=region,
        availability_zone=availability_zone,
        instance_type=instance_type,
        instance_count=count,
        start_time=start,
        end_time=end,
        duration_hours=duration_hours,
        upfront_fee_usd=fee,
        usd_per_instance_hour=usd_per_instance_hour(fee, instance_count=count, hours=hours),
        on_demand_usd_per_hour=rate,
        on_demand_equivalent_usd=equivalent,
        saving_percent=saving_percent(fee, equivalent) if equivalent else None,
        break_even_utilisation=break_even_utilisation(fee, equivalent) if equivalent else None,
        searched_duration_hours=searched_duration_hours,
        searched_count=searched_count,
        feasible=not reasons,
        infeasible_reason="; ".join(reasons) or None,
    )


def _infeasible_reasons(
    request: ReservationRequest,
    *,
    instance_type: str,
    count: int,
    duration_hours: int,
    start: datetime,
    end: datetime,
) -> list[str]:
    reasons = []
    if instance_type != request.instance_type:
        reasons.append(f"instance type {instance_type} (requested {request.instance_type})")
    if count < request.instance_count:
        reasons.append(f"{count} instances (requested {request.instance_count})")
    if duration_hours != request.duration_hours:
        reasons.append(f"{duration_hours} h (requested {request.duration_hours} h)")
    if start < request.earliest_start:
        reasons.append(f"starts {iso_z(start)}, before the window opens {iso_z(request.earliest_start)}")
    if end > request.latest_end:
        reasons.append(f"ends {iso_z(end)}, after the window closes {iso_z(request.latest_end)}")
    return reasons


def _region_rank(regions: Sequence[str], region: str) -> int:
    return regions.index(region) if region in regions else len(regions)


def rank(offerings: Iterable[Offering], regions: Sequence[str]) -> list[Offering]:
    """The feasible offerings, best first: lowest upfront fee, earliest start, preferred region, id."""
    return sorted(
        (o for o in offerings if o.feasible),
        key=lambda o: (o.upfront_fee_usd, o.start_time, _region_rank(regions, o.region), o.offering_id),
    )


def replacement(
    offerings: Iterable[Offering], request: ReservationRequest, stale: OfferingSummary
) -> Offering | None:
    """What to buy instead of ``stale``, an offering that expired at the purchase, from a fresh search:
    the best ranked offering other than ``stale`` when its fee is within ``max_upfront_fee_usd`` and, above
    ``approval_above_usd``, not above ``stale``'s fee (the amount that was approved or under the
    threshold); None otherwise (ranked by fee: when the best is not allowed, no other one is)."""
    ranked = rank((o for o in offerings if o.offering_id != stale.offering_id), request.regions)
    if not ranked or ranked[0].upfront_fee_usd > request.max_upfront_fee_usd:
        return None
    best = ranked[0]
    threshold = request.approval_above_usd
    if (
        threshold is not None
        and best.upfront_fee_usd > threshold
        and best.upfront_fee_usd > stale.upfront_fee_usd
    ):
        return None
    return best


def alternatives(
    offerings: Iterable[Offering], request: ReservationRequest, *, limit: int = 5
) -> list[Offering]:
    """The infeasible offerings nearest to the request (other durations, counts, windows), nearest first.

    Nearness: duration difference, then instance-count difference, then upfront fee, start and region
    preference. At most one alternative per (region, duration, count), so the list shows variety.
    """
    ordered = sorted(
        (o for o in offerings if not o.feasible),
        key=lambda o: (
            abs(o.duration_hours - request.duration_hours),
            abs(o.instance_count - request.instance_count),
            o.upfront_fee_usd,
            o.start_time,
            _region_rank(request.regions, o.region),
            o.offering_id,
        ),
    )
    seen: set[tuple[str, int, int]] = set()
    result: list[Offering] = []
    for offering in ordered:
        key = (offering.region, offering.duration_hours, offering.instance_count)
        if key in seen:
            continue
        seen.add(key)
        result.append(offering)
        if len(result) >= limit:
            break
    return result
