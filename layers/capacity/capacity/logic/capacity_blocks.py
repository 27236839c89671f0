"""The EC2 path (``platform`` ``ec2``, issue 6): buy a Capacity Block for ML exactly once, follow it to
``active``, launch the instances into it, and terminate them before AWS reclaims the capacity.

Each step is called by the step of the SageMaker path it parallels (the state machines are shared):

* :func:`purchase_block` from ``purchase_capacity``: ``PurchaseCapacityBlock`` exactly once. The intent is
  recorded first (``PURCHASE_INTENT``, conditional put); the block's reservation is tagged with the
  request id (``TagSpecifications``); before any retry (intent already recorded, or a timeout that may
  have committed) the reservation is looked up by that tag (``DescribeCapacityReservations``) and
  adopted. ``PurchaseCapacityBlock`` takes no client token, so it is never retried blindly.
* :func:`block_activation` from ``wait_for_activation``: the reservation's state
  ``payment-pending -> scheduled -> active`` (AWS_FACTS.md), reported in the training plan vocabulary the
  state machine branches on (``Pending``, ``Scheduled``, ``Active``). Before the start the available
  count reads 0: that is not a failure. ``payment-failed``, ``failed``, ``cancelled``, ``expired`` and
  ``unavailable`` end the lifecycle with :class:`~capacity.errors.PlanFailed`.
* :func:`launch_instances` (Lambda ``launch_instances``): ``RunInstances`` from the request's launch
  template into the block (``InstanceMarketOptions.MarketType = capacity-block`` and
  ``CapacityReservationSpecification.CapacityReservationTarget``), with a client token derived from the
  request id, then ``READY`` with the reservation id, zone and instance ids. Without a launch template
  nothing is launched and the requester gets the reservation to launch into.
* :func:`release_block` from ``release_capacity``: terminate the instances tagged with the request id,
  wait until they are gone, record ``RELEASED`` with the cost summary.
* :func:`expiry_warning` (Lambda ``capacity_block_events``): the block's expiration warning event (40
  minutes before the end) becomes ``ReleaseRequested`` for the request that owns the block.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from capacity import TAG_REQUEST_ID, messages
from capacity.contracts import (
    ActivationInput,
    ActivationOutput,
    LaunchInput,
    LaunchOutput,
    PurchaseOutput,
    ReleaseInput,
    ReleaseOutput,
    backoff_seconds,
)
from capacity.errors import (
    LaunchFailed,
    LeftoverResources,
    PlanFailed,
    PurchaseFailed,
    ReleaseStuck,
    RetryableAwsError,
)
from capacity.ledger import RELEASED_MARKER
from capacity.logic.buy_once import Bought
from capacity.logic.checks import live_claimants, require_deployable
from capacity.logic.common import (
    Purchase,
    check_activation_deadlines,
    load_purchase,
    load_request,
    post,
    record_activation,
    states,
    stop_if_released,
    void_purchase,
)
from capacity.logic.costs import record_usage
from capacity.logic.ending import record_released
from capacity.logic.forwarding import ensure_forwarding
from capacity.logic.search import search_block_duration
from capacity.models import (
    OfferingSummary,
    ReleaseRequestedDetail,
    ReservationPurchasedDetail,
    ReservationReadyDetail,
    ReservationRequest,
    State,
)
from capacity.naming import release_schedule_name
from capacity.ports import Ec2Port, Ports
from capacity.ranking import replacement
from capacity.resources import LIVE_INSTANCE_STATES, CapacityReservation, Instance, tags_for
from capacity.timeutil import iso_z, parse_utc, short

logger = logging.getLogger(__name__)

RELEASE_REASON = "reservation-end"
EXPIRY_REASON = "capacity-block-expiring"
ENDED_STATES = frozenset({"payment-failed", "failed", "cancelled", "expired", "unavailable", "unsupported"})
"""Reservation states after which the block will never serve (botocore ``CapacityReservationState``)."""
_AS_PLAN_STATUS = {"payment-pending": "Pending", "scheduled": "Scheduled", "active": "Active"}
LATEST_RELEASE_BEFORE_END = timedelta(minutes=35)
"""AWS starts terminating a block's instances 30 minutes before its end (10 minutes after the expiration
warning, AWS_FACTS.md): the scheduled release is never later than 35 minutes before the end."""
MAX_LAUNCH_POLLS = 20
MAX_TERMINATE_POLLS = 20
POLL_SECONDS = 30


def client_token(request_id: str) -> str:
    """The ``RunInstances`` client token of a request (<= 64 ASCII characters, one per request)."""
    return "co-" + hashlib.sha256(request_id.encode()).hexdigest()[:40]


# ------------------------------------------------------------------------------------------ purchase


def _adopt(ec2: Ec2Port, request_id: str) -> CapacityReservation | None:
    """The reservation already bought for ``request_id`` (tagged with it), if any."""
    found = [
        r for r in ec2.find_capacity_reservations(request_id) if r.tags.get(TAG_REQUEST_ID) == request_id
    ]
    if len(found) > 1:  # never expected: tell a person, keep the first
        logger.error("request %s owns %d capacity blocks: %s", request_id, len(found), found)
    return found[0] if found else None


class CapacityBlockBuyer:
    """The capacity block part of :func:`~capacity.logic.buy_once.buy_once` (``PurchaseCapacityBlock``).

    The ``PURCHASE`` item names the capacity reservation in the training plan fields the state machine
    passes on: ``training_plan_arn`` = the reservation ARN, ``training_plan_name`` = the reservation id
    (``cr-...``); it also has ``platform: ec2``, ``capacity_reservation_id`` and ``availability_zone``.
    """

    platform = "ec2"
    what = "capacity block"
    unique_call = False  # no client token, no name: a second call buys a second block

    def preflight(self, request: ReservationRequest, ports: Ports, region: str) -> None:
        """The launch template and its version exist in the block's region, and its instance profile runs as
        an allowed role (``LaunchTemplateNotFound``; :func:`~capacity.logic.checks.require_deployable`): the
        instances start from it days later, when nothing can be undone."""
        require_deployable(request, ports, region)

    def find(
        self, request: ReservationRequest, ports: Ports, region: str, offering: OfferingSummary
    ) -> Bought | None:
        """The reservation tagged with the request id in ``region`` (``DescribeCapacityReservations``)."""
        found = _adopt(ports.ec2(region), request.id)
        return None if found is None else _bought(found, offering)

    def buy(
        self, request: ReservationRequest, ports: Ports, region: str, offering: OfferingSummary
    ) -> Bought:
        """``PurchaseCapacityBlock`` once (a client without botocore retries), tagged with the request id.

        Raises:
            RetryableAwsError: throttling, a 5xx or a timeout (it may have committed: the step is retried
                and looks the block up first).
            PurchaseFailed: EC2 returned no capacity reservation.
        """
        ec2 = ports.ec2(region)
        try:
            reservation = ec2.purchase_capacity_block(
                offering_id=offering.offering_id, tags=tags_for(request.id)
            )
        except RetryableAwsError:
            found = _adopt(ec2, request.id)  # the timeout may have committed: adopt what is visible already
            if found is None:
                raise
            reservation = found
        if not reservation.reservation_id:
            raise PurchaseFailed(f"PurchaseCapacityBlock in {region} returned no capacity reservation")
        return _bought(reservation, offering)

    def research(
        self, request: ReservationRequest, ports: Ports, region: str, stale: OfferingSummary
    ) -> OfferingSummary | None:
        """One fresh search like the stale offering's; the cheapest within the rules, or None."""
        best = replacement(
            search_block_duration(ports.ec2(region), request, request.duration_hours), request, stale
        )
        return best.summary() if best is not None else None

    def after(
        self, request: ReservationRequest, item: dict[str, Any], ports: Ports, *, first: bool
    ) -> PurchaseOutput:
        """Release schedule (35 minutes before the end at the latest), ``PURCHASED``, event, message."""
        return _after_purchase(request, item, ports, first=first)


def _bought(reservation: CapacityReservation, offering: OfferingSummary) -> Bought:
    return Bought(
        arn=reservation.arn,
        name=reservation.reservation_id,
        start_time=reservation.start_time,
        end_time=reservation.end_time,
        upfront_fee_usd=None,  # a capacity reservation does not carry its fee: the offering's is recorded
        offering=offering,
        extra={
            "capacity_reservation_id": reservation.reservation_id,
            "availability_zone": reservation.availability_zone or offering.availability_zone,
        },
    )


def _after_purchase(
    request: ReservationRequest, item: Mapping[str, Any], ports: Ports, *, first: bool
) -> PurchaseOutput:
    output = PurchaseOutput.from_purchase_item(item)
    margin = max(timedelta(minutes=request.release_margin_minutes), LATEST_RELEASE_BEFORE_END)
    release_at = output.end_time - margin
    # Scheduled as soon as the money is spent; the expiry warning event (40 minutes before the end) is the
    # other trigger, whichever comes first: outside the stack's region it reaches us through a forwarding
    # rule, put now (an upsert: every retry of this step puts it again).
    ensure_forwarding(ports, output.region)
    ports.scheduler.schedule_release(
        name=release_schedule_name(request.id), at=release_at, request_id=request.id, reason=RELEASE_REASON
    )
    if first:
        ports.events.put(
            "ReservationPurchased",
            ReservationPurchasedDetail(request_id=request.id, **output.model_dump()),
            resources=[output.training_plan_arn],
        )
    zone = str(item.get("availability_zone", ""))
    written = ports.ledger.append(
        request.id,
        State.PURCHASED,
        actor=ports.actor,
        detail={
            "platform": "ec2",
            "capacity_reservation_id": output.training_plan_name,
            "capacity_reservation_arn": output.training_plan_arn,
            "availability_zone": zone,
            "region": output.region,
            "start_time": iso_z(output.start_time),
            "end_time": iso_z(output.end_time),
            "offering_id": item.get("offering_id"),
            "re_searched": bool(item.get("re_searched")),
            "brought": bool(item.get("brought")),
            "release_at": iso_z(release_at),
        },
        money_usd=output.upfront_fee_usd,
        once=True,
    )
    if written is not None:
        post(
            ports,
            messages.block_purchased(request, output, where=zone or output.region, release_at=release_at),
        )
    return output


# ---------------------------------------------------------------------------------------- activation


def block_activation(step: ActivationInput, ports: Ports) -> ActivationOutput:
    """Read the capacity reservation ``step.training_plan_name`` (``cr-...``) once; record ``SCHEDULED`` and
    ``ACTIVE`` the first time each is seen (``SCHEDULED`` with ``observed: false`` when the first read is
    already ``active``).

    Returns:
        ``status`` ``Pending`` (``payment-pending``, or a state on its way such as ``delayed``),
        ``Scheduled`` or ``Active``; ``platform`` ``ec2``; ``attempt + 1``; ``next_wait_seconds``.

    Raises:
        PlanFailed: the reservation is ``payment-failed``, ``failed``, ``cancelled``, ``expired``,
            ``unavailable`` or gone, or still ``payment-pending`` 12 hours after the purchase.
        ActivationTimeout: not ``active`` 2 hours after its start.
        ReservationCancelled: the reservation is releasing or final.
    """
    ec2 = ports.ec2(step.region)
    reservation = ec2.describe_capacity_reservation(step.training_plan_name)
    if reservation is None:
        raise PlanFailed(f"capacity reservation {step.training_plan_name} does not exist in {step.region}")
    if reservation.state in ENDED_STATES:
        void_purchase(ports, step.request_id, reservation.state)
        raise PlanFailed(
            f"capacity block {reservation.reservation_id} is {reservation.state}: it will not serve; nothing "
            "was launched"
        )
    history = stop_if_released(
        ports, step.request_id, f"recording capacity block state {reservation.state}", release=False
    )
    purchase = load_purchase(ports, step.request_id)
    start = reservation.start_time or (purchase.start_time if purchase else None)
    end = reservation.end_time or (purchase.end_time if purchase else None)
    times = {"start_time": iso_z(start) if start else None, "end_time": iso_z(end) if end else None}
    window = f"{short(start) if start else '?'} to {short(end) if end else '?'} UTC"
    status = _AS_PLAN_STATUS.get(reservation.state, "Pending")
    detail = {
        "capacity_reservation_id": reservation.reservation_id,
        "state": reservation.state,
        "available_instance_count": reservation.available_instance_count,
        **times,
    }
    record_activation(
        ports,
        step,
        states(history),
        status,
        name=reservation.reservation_id,
        arn=reservation.arn,
        start=start,
        end=end,
        scheduled=(
            detail,
            messages.block_scheduled(step.request_id, reservation, window=window),
        ),
        active=(
            detail,
            messages.block_active(step.request_id, reservation, window=window),
        ),
    )
    if status != "Active":
        check_activation_deadlines(
            history,
            ports.clock(),
            what=f"capacity block {reservation.reservation_id}",
            state=reservation.state,
            payment_state="payment-pending" if reservation.state == "payment-pending" else None,
            start=start,
        )
    return ActivationOutput(
        status=status,
        attempt=step.attempt + 1,
        next_wait_seconds=backoff_seconds(step.attempt, base=60, cap=900),
        platform="ec2",
    )


# -------------------------------------------------------------------------------------------- launch


def _live(instances: list[Instance]) -> list[Instance]:
    return [i for i in instances if i.state in LIVE_INSTANCE_STATES]


def launch_instances(step: LaunchInput, ports: Ports) -> LaunchOutput:
    """``launch``: start the request's instances in its active capacity block (once: client token), record
    ``DEPLOYING``; ``status``: ``Running`` once every instance runs (then ``READY`` with the reservation
    id, zone and instance ids, ``ReservationReady``, a Slack message). Without a launch template nothing
    is launched: ``READY`` at once with no instance ids.

    Raises:
        ReservationNotFound: no request or no purchase recorded.
        ReservationCancelled: the reservation is releasing or final.
        CapacityUnavailable: ``RunInstances`` met ``InsufficientInstanceCapacity``.
        LaunchFailed: an instance stopped or terminated while starting, or not running after
            :data:`MAX_LAUNCH_POLLS` polls.
    """
    request = load_request(ports, step.request_id)
    purchase = load_purchase(ports, step.request_id)
    if purchase is None:
        raise PlanFailed(f"no capacity block purchase is recorded for {step.request_id!r}")
    stop_if_released(ports, request.id, "launching")
    ec2 = ports.ec2(purchase.region)
    reservation_id = purchase.training_plan_name
    template = request.launch_template
    if template is None:
        return _ready(request, ports, purchase, [])
    if step.action == "launch":
        ports.ledger.append(
            request.id,
            State.DEPLOYING,
            actor=ports.actor,
            detail={"capacity_reservation_id": reservation_id, "launch_template": template.as_aws()},
            once=True,
        )
        ec2.run_instances(
            count=request.instance_count,
            instance_type=request.instance_type,
            launch_template=template.as_aws(),
            client_token=client_token(request.id),
            tags=tags_for(request.id),
            capacity_reservation_id=reservation_id,
            market_type="capacity-block",
        )
        # A release that ran while RunInstances was in flight found no instance: release again.
        stop_if_released(ports, request.id, "launching")
    instances = ec2.find_instances(request.id)
    gone = [i.instance_id for i in instances if i.state not in ("pending", "running")]
    if gone:
        raise LaunchFailed(
            f"instance(s) {', '.join(gone)} of {request.id} stopped or terminated while starting in capacity "
            f"block {reservation_id}"
        )
    running = [i for i in instances if i.state == "running"]
    if len(running) >= request.instance_count:
        return _ready(request, ports, purchase, running)
    if step.attempt >= MAX_LAUNCH_POLLS:
        raise LaunchFailed(
            f"{len(running)} of {request.instance_count} instances of {request.id} running after "
            f"{step.attempt} polls in capacity block {reservation_id}"
        )
    return LaunchOutput(
        status="Pending",
        capacity_reservation_id=reservation_id,
        availability_zone=purchase.availability_zone,
        instance_ids=sorted(i.instance_id for i in instances),
        next_wait_seconds=backoff_seconds(step.attempt, base=POLL_SECONDS, cap=300),
        attempt=step.attempt + 1,
    )


def _ready(
    request: ReservationRequest, ports: Ports, purchase: Purchase, running: list[Instance]
) -> LaunchOutput:
    ids = sorted(i.instance_id for i in running)
    zone = purchase.availability_zone
    reservation_id = purchase.training_plan_name
    written = ports.ledger.append(
        request.id,
        State.READY,
        actor=ports.actor,
        detail={"capacity_reservation_id": reservation_id, "availability_zone": zone, "instance_ids": ids},
        once=True,
    )
    if written is not None:
        record_usage(ports, request.id, len(ids), source="instances-running")
        ports.events.put(
            "ReservationReady",
            ReservationReadyDetail(
                request_id=request.id,
                region=purchase.region,
                capacity_reservation_id=reservation_id,
                availability_zone=zone,
                instance_ids=ids,
            ),
            resources=[purchase.training_plan_arn],
        )
        launched = (
            f"{len(ids)} x {request.instance_type} running: {', '.join(ids)}"
            if ids
            else "no launch template was given, so nothing was launched: launch into it with "
            "InstanceMarketOptions.MarketType=capacity-block and CapacityReservationSpecification."
            f"CapacityReservationTarget.CapacityReservationId={reservation_id}"
        )
        post(
            ports,
            messages.block_ready(
                request.id,
                reservation_id,
                zone=zone,
                region=purchase.region,
                launched=launched,
                end=purchase.end_time,
            ),
        )
    return LaunchOutput(
        status="Running",
        capacity_reservation_id=reservation_id,
        availability_zone=zone,
        instance_ids=ids,
        next_wait_seconds=0,
        attempt=0,
    )


# ------------------------------------------------------------------------------------------- release


def release_block(step: ReleaseInput, ports: Ports, purchase: Purchase) -> ReleaseOutput:
    """The release actions for a capacity block (called by ``release_capacity`` for ``platform`` ``ec2``).

    ``begin`` records ``RELEASING`` and terminates every live instance tagged with the request;
    ``delete_components`` terminates what is still live and polls until none is (30 s doubling to 300 s,
    :class:`ReleaseStuck` after :data:`MAX_TERMINATE_POLLS`); ``delete_scaling``, ``delete_alarms``,
    ``delete_endpoint`` and ``delete_endpoint_config`` have nothing to do; ``finish`` verifies no instance
    is left, records ``RELEASED`` once with the cost summary, puts ``ReservationReleased``, posts it and
    deletes the schedule. The block itself is paid upfront and cannot be deleted.

    Raises:
        ReleaseStuck: instances still live after the last poll.
        LeftoverResources: ``finish`` found live instances tagged with the request.
    """
    ec2 = ports.ec2(purchase.region)
    if step.action == "begin":
        ports.ledger.append(
            step.request_id,
            State.RELEASING,
            actor=ports.actor,
            detail={
                "reason": step.reason or "requested",
                "capacity_reservation_id": purchase.training_plan_name,
            },
            once=True,
        )
        _terminate(ec2, step.request_id)
        return ReleaseOutput(done=False)
    if step.action == "delete_components":
        live = _terminate(ec2, step.request_id)
        if not live:
            return ReleaseOutput(done=True)
        still = [f"instance {i.instance_id} ({i.state})" for i in live]
        if step.attempt >= MAX_TERMINATE_POLLS:
            raise ReleaseStuck(
                f"release of {step.request_id} gave up after {step.attempt} polls; still billing: "
                f"{', '.join(still)}. A person must terminate these."
            )
        return ReleaseOutput(
            done=False,
            remaining=len(live),
            next_wait_seconds=backoff_seconds(step.attempt, base=POLL_SECONDS, cap=300),
            attempt=step.attempt + 1,
        )
    if step.action == "finish":
        return _finish(step, ports, ec2, purchase)
    # delete_scaling, delete_alarms, delete_endpoint, delete_endpoint_config: SageMaker-only resources.
    return ReleaseOutput(done=True)


def live_instances(ports: Ports, purchase: Purchase, request_id: str) -> list[str]:
    """Ids of the instances of ``request_id`` that still bill (pending, running, stopping...) in the
    purchase's region."""
    return [i.instance_id for i in _live(ports.ec2(purchase.region).find_instances(request_id))]


def _terminate(ec2: Ec2Port, request_id: str) -> list[Instance]:
    """Terminate every live instance of the request; returns those not yet ``terminated``."""
    live = _live(ec2.find_instances(request_id))
    to_stop = [i.instance_id for i in live if i.state != "shutting-down"]
    if to_stop:
        ec2.terminate_instances(to_stop)
    return live


def _finish(step: ReleaseInput, ports: Ports, ec2: Ec2Port, purchase: Purchase) -> ReleaseOutput:
    left = [i.instance_id for i in _live(ec2.find_instances(step.request_id))]
    if left:
        raise LeftoverResources(
            f"release of {step.request_id} left instances tagged with it: {', '.join(left)}"
        )
    return record_released(
        step,
        ports,
        purchase,
        lambda summary, reason: messages.released_on_ec2(
            summary, request_id=step.request_id, reason=reason, market=purchase.market
        ),
    )


# -------------------------------------------------------------------------------------- expiry event


def expiry_warning(event: Mapping[str, Any], ports: Ports) -> dict[str, Any]:
    """Turn a capacity block expiration warning (``aws.ec2``, detail ``capacity-reservation-id``, either
    documented detail-type spelling) into ``ReleaseRequested`` for the request that owns the block.

    Returns:
        ``{"request_id": <id> | None, "released": bool}``: None/False when the block is not the
        orchestrator's (no request-id tag, and no live request adopted it as brought) or already released.
    """
    detail = event.get("detail") or {}
    reservation_id = str(detail.get("capacity-reservation-id") or "")
    region = str(event.get("region") or ports.settings.region)
    if not reservation_id:
        logger.warning("capacity block event without capacity-reservation-id: %s", event)
        return {"request_id": None, "released": False}
    reservation = ports.ec2(region).describe_capacity_reservation(reservation_id)
    request_id = reservation.tags.get(TAG_REQUEST_ID) if reservation else None
    if not request_id:  # a brought block carries no tag of ours: the request that adopted it, if any
        request_id = next(iter(live_claimants(ports, reservation_id)), None)
    if not request_id:
        return {"request_id": None, "released": False}
    if ports.ledger.get(request_id, RELEASED_MARKER) is not None:
        return {"request_id": request_id, "released": False}
    warned_end = _parse_end(detail.get("end-date"))
    if reservation and reservation.end_time and warned_end and reservation.end_time > warned_end:
        # Delivered late or reordered, about an end the block has since been extended past (issue 17): act
        # on the block as it is now; its new end will warn again.
        logger.info(
            "expiry warning for %s ends %s; the block now ends %s",
            reservation_id,
            warned_end,
            reservation.end_time,
        )
        return {"request_id": request_id, "released": False}
    ports.events.put(
        "ReleaseRequested",
        ReleaseRequestedDetail(request_id=request_id, reason=EXPIRY_REASON),
        resources=[reservation.arn] if reservation and reservation.arn else [],
    )
    return {"request_id": request_id, "released": True}


def _parse_end(value: object) -> datetime | None:
    """A capacity block event's ``end-date`` (``2026-12-10T11:30:00Z``); None when absent or unreadable."""
    try:
        return parse_utc(str(value)) if value else None
    except ValueError:
        return None
