"""The record of on-demand tries, shared by both platforms' on-demand wings
(:mod:`capacity.logic.ec2.on_demand`, :mod:`capacity.logic.sagemaker.on_demand`): every try an
``ON_DEMAND_TRY#<market>#<region>`` item, the ``PURCHASE`` of what runs on demand (no upfront fee), its
release schedule, ``PLANNED`` (decision ``ON_DEMAND``) and ``DEPLOYING``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from capacity import messages
from capacity.contracts.common import backoff_seconds
from capacity.contracts.on_demand import OnDemandOutput
from capacity.errors import ReservationCancelled
from capacity.events import ReservationPlannedDetail
from capacity.lifecycle import Event
from capacity.logic.steps.buy_once import RELEASE_REASON
from capacity.logic.steps.common import (
    first_entry,
    post,
    stop_if_released,
)
from capacity.naming import release_schedule_name
from capacity.platforms import platform
from capacity.ports import Ports
from capacity.pricing import on_demand_usd_per_hour
from capacity.purchases import OnDemandEndpointPurchase, OnDemandInstancesPurchase
from capacity.record_kinds import ON_DEMAND_TRY_PREFIX, PURCHASE
from capacity.records import State
from capacity.request import ReservationRequest
from capacity.timeutil import iso_z, parse_utc, short

NOT_VISIBLE_GRACE = timedelta(minutes=15)
"""How long after a create call (``CreateEndpoint``, ``RunInstances``) a "not found" or an empty listing is
not believed: SageMaker's and EC2's reads are eventually consistent (the local cloud's ``stale_listing``),
and a resource thought gone would bill with nothing left to delete it."""


def written_recently(ports: Ports, request_id: str, sort_key: str, now: datetime) -> bool:
    """True when the ledger item ``sort_key`` of ``request_id`` (a marker put just before a create call) was
    written less than :data:`NOT_VISIBLE_GRACE` before ``now`` (UTC): what it created may not be listed
    yet."""
    item = ports.ledger.get(request_id, sort_key)
    return item is not None and now < parse_utc(str(item["written_at"])) + NOT_VISIBLE_GRACE


def record_try(
    ports: Ports,
    request: ReservationRequest,
    *,
    market: str,
    region: str,
    order: int,
    outcome: str,
    error: str | None,
    instance_ids: list[str] | None = None,
) -> None:
    ports.ledger.put_once(
        request.id,
        f"{ON_DEMAND_TRY_PREFIX}{market}#{region}",
        {
            "actor": ports.actor,
            "order": order,
            "market": market,
            "region": region,
            "outcome": outcome,
            "error": error,
            "instance_ids": instance_ids or [],
            "at": iso_z(ports.clock()),
        },
    )


def requested_at(ports: Ports, request_id: str, now: datetime) -> datetime:
    requested = first_entry(ports.ledger.history(request_id), State.REQUESTED)
    return requested.at if requested is not None else now


def launched(
    request: ReservationRequest, ports: Ports, *, market: str, region: str, ids: list[str], now: datetime
) -> OnDemandOutput:
    """Record capacity launched on demand (or on spot): its ``PURCHASE``, then :func:`finish_launch`.

    Returns:
        ``endpoint_ready`` (SageMaker) or ``launched`` with the instance ids to poll (EC2).
    """
    put_purchase(ports, request, market=market, region=region, start=now, end=request.latest_end, ids=ids)
    finish_launch(request, ports, market=market, region=region, ids=ids)
    if platform(request.platform).serves_models:
        return OnDemandOutput(outcome="endpoint_ready", region=region, market=market)
    return OnDemandOutput(
        outcome="launched",
        region=region,
        market=market,
        instance_ids=sorted(ids),
        next_wait_seconds=backoff_seconds(0, base=30, cap=300),
        attempt=1,
    )


def finish_launch(
    request: ReservationRequest, ports: Ports, *, market: str, region: str, ids: list[str]
) -> None:
    """What follows a launch's ``PURCHASE``, idempotent, so a step retried after any of it failed (a
    throttled ``CreateSchedule``: soak seed 602 #128) finishes it: the stop check, the release schedule at
    ``latest_end - release_margin_minutes``, ``PLANNED`` (decision ``ON_DEMAND``) and ``DEPLOYING``.

    Raises:
        ReservationCancelled: the reservation is releasing or final (its release is requested again).
        RetryableAwsError: the schedule or a record could not be written (the step is retried).
    """
    rate = on_demand_usd_per_hour(region, request.instance_type)
    # Cancelled while launching: the PURCHASE now tells a new release what to delete (a release that ran
    # before it found nothing).
    stop_if_released(ports, request.id, "launching on demand")
    release_at = request.latest_end - timedelta(minutes=request.release_margin_minutes)
    ports.scheduler.schedule_release(
        name=release_schedule_name(request.id), at=release_at, request_id=request.id, reason=RELEASE_REASON
    )
    reason = (
        f"{request.instance_count} x {request.instance_type} on {market} in {region} now, until "
        f"{short(request.latest_end)} UTC (latest_end): no reservation needed"
        + (f"; about ${rate:.2f} per instance-hour" if rate is not None else "")
        + "."
    )
    try:
        # Only while no outcome is recorded (one transaction each): a DELETE after the check above must not
        # be followed by PLANNED/DEPLOYING; the check, run again, requests the release once more and raises.
        record_launch(request, ports, market=market, region=region, ids=ids, reason=reason, at=release_at)
    except ReservationCancelled:
        stop_if_released(ports, request.id, "launching on demand")
        raise


def record_launch(
    request: ReservationRequest,
    ports: Ports,
    *,
    market: str,
    region: str,
    ids: list[str],
    reason: str,
    at: datetime,
) -> None:
    """``PLANNED`` (decision ``ON_DEMAND``, with its event and post) then ``DEPLOYING``, each once.

    Raises:
        ReservationCancelled: an outcome is recorded (see :meth:`capacity.ledger.Ledger.append`).
    """
    written = ports.ledger.record(
        request.id,
        Event.PLAN,
        actor=ports.actor,
        detail={"decision": "ON_DEMAND", "reason": reason, "market": market, "region": region},
    )
    if written is not None:
        ports.events.put(
            "ReservationPlanned",
            ReservationPlannedDetail(request_id=request.id, decision="ON_DEMAND", reason=reason),
        )
        post(ports, messages.on_demand_decision(request.id, reason=reason))
    ports.ledger.record(
        request.id,
        Event.DEPLOY,
        actor=ports.actor,
        detail={"market": market, "region": region, "instance_ids": ids, "release_at": iso_z(at)},
    )


def put_purchase(
    ports: Ports,
    request: ReservationRequest,
    *,
    market: str,
    region: str,
    start: datetime,
    end: datetime,
    ids: list[str],
    timed_out: str | None = None,
) -> None:
    """The ``PURCHASE`` item of capacity run on demand (once): an
    :class:`~capacity.purchases.OnDemandEndpointPurchase` (SageMaker) or
    :class:`~capacity.purchases.OnDemandInstancesPurchase` (EC2: the instance ids), ``market``
    ``on-demand``/``spot``, no upfront fee, ``start``/``end`` UTC, the on-demand rate (USD per instance-hour);
    ``timed_out`` (the reason) when the tries gave up with an endpoint left in ``region`` for the release to
    delete."""
    common: dict[str, Any] = {
        "actor": ports.actor,
        "market": market,
        "timed_out": timed_out,
        "region": region,
        "start_time": start,
        "end_time": end,
        "upfront_fee_usd": Decimal(0),
        "on_demand_usd_per_hour": on_demand_usd_per_hour(region, request.instance_type),
        "instance_type": request.instance_type,
        "instance_count": request.instance_count,
    }
    record = (
        OnDemandInstancesPurchase(**common, instance_ids=ids)
        if platform(request.platform).launches_instances
        else OnDemandEndpointPurchase(**common)
    )
    ports.ledger.put_once(request.id, PURCHASE, record.to_item())
