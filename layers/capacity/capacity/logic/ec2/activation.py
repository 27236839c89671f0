"""A capacity block's way to ``active`` (``wait_for_activation`` for ``platform`` ``ec2``): the reservation's
state ``payment-pending -> scheduled -> active`` (AWS_FACTS.md), reported in the training plan vocabulary
the state machine branches on (``Pending``, ``Scheduled``, ``Active``). Before the start the available
count reads 0: that is not a failure. ``payment-failed``, ``failed``, ``cancelled``, ``expired`` and
``unavailable`` end the lifecycle with :class:`~capacity.errors.PlanFailed`.
"""

from __future__ import annotations

from capacity import messages
from capacity.contracts import (
    ActivationInput,
    ActivationOutput,
)
from capacity.errors import (
    PlanFailed,
)
from capacity.logic.common import (
    load_purchase,
    record_activation,
    stop_if_released,
    void_purchase,
)
from capacity.ports import Ports
from capacity.timeutil import iso_z, short

ENDED_STATES = frozenset({"payment-failed", "failed", "cancelled", "expired", "unavailable", "unsupported"})
"""Reservation states after which the block will never serve (botocore ``CapacityReservationState``)."""


_AS_PLAN_STATUS = {"payment-pending": "Pending", "scheduled": "Scheduled", "active": "Active"}


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
    return record_activation(
        ports,
        step,
        history,
        status,
        platform="ec2",
        what=f"capacity block {reservation.reservation_id}",
        state=reservation.state,
        payment_state="payment-pending" if reservation.state == "payment-pending" else None,
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
