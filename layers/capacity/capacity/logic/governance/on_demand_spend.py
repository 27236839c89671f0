"""Every dollar counts against the team (issue 28, point 6): capacity run on demand (or on spot) is held in
the team's month, the account's month and the team's instance quota **before** it is launched, as a
purchase's upfront fee is held before the purchase call, and **settled** from what ran when it is released.
One mechanism for both: :func:`capacity.logic.governance.policy.reserve_spend` (the conditional DynamoDB
transaction that two spends racing for the team's last dollars cannot both pass),
:func:`~capacity.logic.governance.policy. settle_spend` and
:func:`~capacity.logic.governance.policy.give_back`.

- **The hold** (:func:`hold_on_demand`, the ``try`` step, after the request's own limits passed):
  ``instance_count x hours from now to latest_end x the dearest on-demand rate among the request's regions``
  (:func:`capacity.recommendation.on_demand_hold_usd`, the figure the request's budget and the approval
  threshold are judged by; spot at the on-demand rate, its upper bound), keyed :func:`hold_key`, in the UTC
  month of the launch. Refused (the team's month, the account cap or the quota would be exceeded): nothing is
  launched, the refusal is on record (ledger item ``ON_DEMAND_REFUSED``: ``amount_usd``, ``reason``) and
  the workflow reserves instead, as when no region has capacity (or fails with the reason when nothing can
  be reserved).
- **Given back** (:func:`give_back_on_demand`: money and quota) when nothing was launched: every region was
  out of capacity, or the request stopped or failed before a launch was recorded (no ``PURCHASE``).
- **Settled** (:func:`settle_on_demand`, at the release's end): the hold is set to the on-demand cost of the
  instance-hours that ran (the release's cost summary,
  :func:`capacity.logic.governance.costs.on_demand_summary`), the difference given back to (or taken from) the
  month the hold is in, and its instances leave the quota.

With no policy table (``ports.policy`` None) nothing is held, as for purchases.
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal

from capacity.errors import TeamLimitExceeded
from capacity.logic.governance import policy
from capacity.ports import Ports
from capacity.pricing import format_usd, money_str
from capacity.recommendation import on_demand_hold_usd
from capacity.record_kinds import ON_DEMAND_REFUSED, PURCHASE
from capacity.request import ReservationRequest
from capacity.timeutil import iso_z, short

logger = logging.getLogger(__name__)


def hold_key(request_id: str) -> str:
    """The team hold of the request's on-demand (or spot) capacity: its own key, never a purchase attempt's
    (:func:`capacity.logic.continuity.attempts.hold_key`), so the reservation the workflow may buy after the
    tries holds its fee apart."""
    return f"{request_id}#ON_DEMAND"


def hold_on_demand(request: ReservationRequest, ports: Ports, now: datetime) -> str | None:
    """Hold what on demand may cost for ``request`` (see the module) before anything is launched.

    Idempotent: a retried ``try`` step holds nothing twice (a later ``now`` costs less: the first hold
    stands).

    Returns:
        None: held (or no policy table): launch. Else why nothing may be launched on demand, a sentence
        (the team's refusal, recorded as ``ON_DEMAND_REFUSED``; or the hold was given back already: the tries
        ended, they are not made again).

    Raises:
        RetryableAwsError: DynamoDB throttled or the transaction conflicted (the step retries).
    """
    amount = on_demand_hold_usd(request, now)
    if amount is None:  # never reached: an unpriced request is skipped before (on_demand_over_limit)
        return "its on-demand cost is unknown, so it cannot be held against the team's month"
    until = short(request.latest_end)
    spend = f"on demand for {request.instance_count} x {request.instance_type} until {until} UTC"
    try:
        held = policy.reserve_spend(
            ports,
            key=hold_key(request.id),
            team_name=request.team,
            amount_usd=amount,
            instance_type=request.instance_type,
            instance_count=request.instance_count,
            spend=spend,
            nothing="nothing was launched on demand",
        )
    except TeamLimitExceeded as refused:
        reason = str(refused)
        ports.ledger.put_once(
            request.id,
            ON_DEMAND_REFUSED,
            {"actor": ports.actor, "amount_usd": money_str(amount), "reason": reason, "at": iso_z(now)},
        )
        logger.info("on demand for %s refused by its team: %s", request.id, reason)
        return reason
    if held is not None and held.money_returned:
        return (
            f"its on-demand tries ended and their hold of {format_usd(held.amount_usd)} was given back: they "
            "are not made again"
        )
    return None


def refused_on_demand(ports: Ports, request_id: str) -> str | None:
    """Why the request's team refused its on-demand launch (the ``ON_DEMAND_REFUSED`` item), or None."""
    item = ports.ledger.get(request_id, ON_DEMAND_REFUSED)
    return str(item["reason"]) if item is not None else None


def give_back_on_demand(ports: Ports, request_id: str) -> bool:
    """Return the on-demand hold's money and instances: nothing was launched (no ``PURCHASE`` recorded;
    whatever was launched is recorded before anything else, and a release settles it). Once; False when there
    was nothing to return (or a launch is recorded, or no policy)."""
    if ports.ledger.get(request_id, PURCHASE) is not None:
        return False
    return policy.give_back(ports, hold_key(request_id), money=True, quota=True)


def settle_on_demand(ports: Ports, request_id: str, actual_usd: Decimal | None) -> None:
    """At the release of capacity run on demand or on spot: the hold becomes ``actual_usd`` (USD, the
    on-demand cost of the instance-hours that ran; the difference goes back to the hold's month, or is taken:
    never refused, the money is spent) and its instances leave the team's quota. ``actual_usd`` None (no
    known price) keeps the hold as it is. Idempotent (a retried release settles the same figure)."""
    if actual_usd is not None:
        policy.settle_spend(ports, key=hold_key(request_id), amount_usd=actual_usd)
    policy.give_back(ports, hold_key(request_id), money=False, quota=True)
