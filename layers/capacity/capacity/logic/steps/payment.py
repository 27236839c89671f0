"""A purchase's own payment when its release begins (issue 29): a training plan ``Pending`` or a capacity
block ``payment-pending`` (or not listed yet: EC2's reads lag behind the purchase) is money whose outcome AWS
has not told yet. AWS fails such a payment within 12 hours (AWS_FACTS.md, "Capacity Blocks"; assumed for
training plans, :data:`~capacity.logic.steps.common.PAYMENT_DEADLINE`), and then charged nothing. A release
that began before the outcome and never looked again would leave the fee recorded as paid; so, as for an
extension in flight (:mod:`capacity.logic.continuity.extend`), the release waits (nothing of a reservation not
yet paid can run, so nothing bills meanwhile) and, when the payment failed, records the purchase voided
(``PURCHASE_VOIDED``): the ``RELEASED`` entry then gives the fee back (:func:`refund`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from capacity.logic.steps.common import PAYMENT_DEADLINE, Purchase, first_entry, void_purchase
from capacity.ports import Ports
from capacity.purchases import CapacityBlockPurchase, TrainingPlanPurchase
from capacity.record_kinds import PURCHASE_VOIDED
from capacity.records import LedgerEntry, State

PENDING_PAYMENT = frozenset({"Pending", "payment-pending"})
"""A training plan's and a capacity block's state while AWS processes the payment."""
POLL = timedelta(minutes=10)
"""How often a release waiting for a purchase's payment looks again."""
GRACE = timedelta(minutes=10)
"""How long after AWS's 12-hour deadline the release still waits (its reads lag)."""


def _status(ports: Ports, purchase: Purchase) -> str | None:
    """AWS's status of the reservation bought (None when it does not show it)."""
    match purchase.record:
        case CapacityBlockPurchase(capacity_reservation_id=block_id, region=region):
            block = ports.ec2(region).describe_capacity_reservation(block_id)
            return block.state if block is not None else None
        case TrainingPlanPurchase(training_plan_name=name, region=region):
            plan = ports.sagemaker(region).describe_training_plan(name)
            return plan.status if plan is not None else None
        case _:
            return None  # on demand: no payment to wait for


def unsettled(ports: Ports, request_id: str, purchase: Purchase) -> datetime | None:
    """When to look again at the purchase's payment, or None when it is settled (paid, or failed and now
    recorded voided) or the wait is over (AWS's deadline plus :data:`GRACE` after ``PURCHASED``).

    Raises:
        RetryableAwsError: AWS could not be asked (the release retries).
    """
    if purchase.brought or purchase.market != "reserved":
        return None  # someone else's payment, or nothing paid upfront
    if ports.ledger.get(request_id, PURCHASE_VOIDED) is not None:
        return None
    status = _status(ports, purchase)
    if status is not None and status not in PENDING_PAYMENT:
        void_purchase(ports, request_id, status)  # only an uncharged status voids
        return None
    purchased = first_entry(ports.ledger.history(request_id), State.PURCHASED)
    since = purchased.at if purchased is not None else purchase.written_at
    if since is None:
        return None
    now, deadline = ports.clock(), since + PAYMENT_DEADLINE + GRACE
    return min(now + POLL, deadline) if now < deadline else None


def refund(history: list[LedgerEntry], voided: Mapping[str, Any] | None) -> Decimal | None:
    """The money an entry records when AWS charged nothing after all (``voided``): minus the voided fee,
    unless an entry gave it back already (``RELEASED`` and a failure's ``FAILED`` both may: soak seed 602
    #188 had it twice); else None. The fee comes back once."""
    if voided is None or any(e.money_usd is not None and e.money_usd < 0 for e in history):
        return None
    return -Decimal(str(voided["upfront_fee_usd"]))
