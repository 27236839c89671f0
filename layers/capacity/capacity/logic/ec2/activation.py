"""A capacity block's way to ``active`` (``wait_for_activation`` for ``platform`` ``ec2``): the reservation's
state ``payment-pending -> scheduled -> active`` (AWS_FACTS.md), reported in the training plan vocabulary
the state machine branches on (``Pending``, ``Scheduled``, ``Active``). Before the start the available
count reads 0: that is not a failure. ``payment-failed``, ``failed``, ``cancelled``, ``expired`` and
``unavailable`` end the lifecycle with :class:`~capacity.errors.PlanFailed`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from capacity import messages
from capacity.contracts.activation import ActivationInput, CapacityBlockHeld
from capacity.errors import PlanFailed
from capacity.events import CapacityBlockActiveDetail
from capacity.logic.steps.common import Sighting, load_purchase, void_purchase
from capacity.ports import Ports
from capacity.timeutil import short

ENDED_STATES = frozenset({"payment-failed", "failed", "cancelled", "expired", "unavailable", "unsupported"})
"""Reservation states after which the block will never serve (botocore ``CapacityReservationState``)."""


_AS_PLAN_STATUS = {"payment-pending": "Pending", "scheduled": "Scheduled", "active": "Active"}


def block_activation(step: ActivationInput, ports: Ports) -> Sighting:
    """Read the capacity reservation the purchase names (``capacity_reservation_id``, ``cr-...``) once.

    Returns:
        What :func:`capacity.logic.steps.common.record_activation` records: ``status`` ``Pending``
        (``payment-pending``, or a state on its way such as ``delayed``), ``Scheduled`` or ``Active``; the
        reservation's id, state and available count as the ledger detail.

    A reservation ``DescribeCapacityReservations`` does not find is one bought moments ago that EC2's
    eventually consistent reads do not show yet (AWS_FACTS.md, "Payments, listings, limits"; the purchase
    answered its id): it is ``Pending`` under the payment's deadline, so one never seen fails 12 hours after
    its purchase (:func:`~capacity.logic.steps.common.check_activation_deadlines`), never at the first read.

    Raises:
        PlanFailed: the reservation is ``payment-failed``, ``failed``, ``cancelled``, ``expired`` or
            ``unavailable`` (a voided purchase is recorded when AWS charged nothing).
    """
    held = step.capacity_block()
    ec2 = ports.ec2(held.region)
    reservation = ec2.describe_capacity_reservation(held.capacity_reservation_id)
    if reservation is None:
        return _not_visible_yet(step.request_id, held, ports)
    if reservation.state in ENDED_STATES:
        void_purchase(ports, step.request_id, reservation.state)
        raise PlanFailed(
            f"capacity block {reservation.reservation_id} is {reservation.state}: it will not serve; nothing "
            "was launched"
        )
    detail = {
        "capacity_reservation_id": reservation.reservation_id,
        "state": reservation.state,
        "available_instance_count": reservation.available_instance_count,
    }

    def window(start: datetime | None, end: datetime | None) -> str:
        return f"{short(start) if start else '?'} to {short(end) if end else '?'} UTC"

    return Sighting(
        status=_AS_PLAN_STATUS.get(reservation.state, "Pending"),
        state=reservation.state,
        payment_state="payment-pending" if reservation.state == "payment-pending" else None,
        what=f"capacity block {reservation.reservation_id}",
        active_event=_active_event(step.request_id, held),
        arn=reservation.arn,
        start=reservation.start_time,
        end=reservation.end_time,
        scheduled_detail=detail,
        active_detail=detail,
        scheduled_message=lambda start, end: messages.block_scheduled(
            step.request_id, reservation, window=window(start, end)
        ),
        active_message=lambda start, end: messages.block_active(
            step.request_id, reservation, window=window(start, end)
        ),
    )


def _active_event(
    request_id: str, held: CapacityBlockHeld
) -> Callable[[datetime | None, datetime | None], CapacityBlockActiveDetail]:
    """``ReservationActive`` of the block for a window (UTC), in the block's own names."""
    return lambda start, end: CapacityBlockActiveDetail(
        request_id=request_id,
        region=held.region,
        capacity_reservation_id=held.capacity_reservation_id,
        start_time=start,
        end_time=end,
    )


def _not_visible_yet(request_id: str, held: CapacityBlockHeld, ports: Ports) -> Sighting:
    """The sighting of a bought block that EC2's listing does not show yet: ``Pending``, waited for under the
    payment's deadline (12 hours after ``PURCHASED``)."""
    purchase = load_purchase(ports, request_id)
    block_id = held.capacity_reservation_id
    unseen = messages.block_not_listed(request_id, block_id)
    return Sighting(
        status="Pending",
        state="not visible yet",
        payment_state="not visible in DescribeCapacityReservations",
        what=f"capacity block {block_id}",
        active_event=_active_event(request_id, held),
        arn=purchase.arn if purchase is not None else "",
        start=None,
        end=None,
        scheduled_detail={},
        active_detail={},
        # Never posted: SCHEDULED and ACTIVE are recorded only for a block that is listed.
        scheduled_message=lambda start, end: unseen,
        active_message=lambda start, end: unseen,
    )
