"""Step 5, ``purchase_capacity``: buy the training plan (or capacity block) exactly once, then schedule its
release.

A router by platform: the exactly-once protocol is :mod:`capacity.logic.steps.buy_once`'s, for both platforms;
each platform's part is its :class:`~capacity.logic.steps.buy_once.Buyer` (its
:class:`~capacity.logic.wings.Wing`'s ``buyer``:
:class:`~capacity.logic.sagemaker.training_plan.TrainingPlanBuyer`,
:class:`~capacity.logic.ec2.capacity_block.CapacityBlockBuyer`). Nothing above ``max_upfront_fee_usd`` is
ever bought; a re-searched offering above the approval threshold must not cost more than the one that was
approved.

A request that brings its own reservation (``training_plan_arn``, ``capacity_reservation_id``; issue 17)
is not bought: :func:`adopt_reservation` checks it
(:func:`~capacity.logic.governance.checks.brought_reservation`) and records it as the ``PURCHASE`` with
``upfront_fee_usd`` 0 and ``brought: true``, with no intent and no team hold
(:func:`~capacity.logic.governance.policy.purchase_check` is never called); the rest is the same.
"""

from __future__ import annotations

from decimal import Decimal

from capacity.contracts.purchase import AdoptInput, PurchaseInput, PurchaseOutput
from capacity.errors import NameCollision
from capacity.logic.governance.checks import brought_reservation
from capacity.logic.steps.buy_once import Bought, after_purchase, buy_once, reconcile, record_purchase
from capacity.logic.steps.common import (
    load_request,
    require_not_final,
    states,
    stop_if_released,
)
from capacity.logic.wings import wing
from capacity.offerings import OfferingSummary
from capacity.ports import Ports
from capacity.record_kinds import PURCHASE
from capacity.records import State


def purchase_capacity(step: PurchaseInput, ports: Ports) -> PurchaseOutput:
    """Buy (or adopt) the training plan or capacity block for ``step.offering``, exactly once
    (:func:`~capacity.logic.steps.buy_once.buy_once`).

    Raises:
        ReservationNotFound: the request is not recorded.
        ReservationCancelled: the reservation was cancelled (or finished) before the purchase.
        ModelNotFound: a ``model_name`` of the request names no model in the offering's region.
        BudgetExceeded: the offering costs more than ``max_upfront_fee_usd``.
        OfferingExpired: the offering expired and one fresh search found nothing buyable.
        PurchaseInProgress: another execution owns the purchase.
        PurchaseUnconfirmed: an earlier call may have bought and is not visible yet (retryable).
        QuotaExceeded, CapacityUnavailable, PurchaseFailed: AWS refused the purchase.
        RetryableAwsError: throttling/5xx/timeouts after retries.
    """
    request = load_request(ports, step.request_id)  # buy_once needs the whole request, not just its platform
    return buy_once(step, request, ports, wing(step.platform or request.platform).buyer)


BROUGHT_OFFERING_ID = "brought"
"""The ``offering_id`` recorded for a brought reservation (no offering was bought)."""


def adopt_reservation(step: AdoptInput, ports: Ports) -> PurchaseOutput:
    """Use the reservation the request brings instead of buying one (issue 17): check it, then record it
    as the ``PURCHASE`` (``upfront_fee_usd`` 0, ``brought: true``, ``offering_id`` ``brought``) and run the
    platform's after-purchase step (release schedule, ``PURCHASED`` with USD 0, event, message). Nothing is
    bought, no purchase intent is written and the team's budget is not held. A retry finds the ``PURCHASE``
    and only repeats the idempotent after-purchase step.

    Raises:
        ReservationNotFound: the request is not recorded.
        ReservationCancelled: the reservation is final before it was adopted.
        BroughtReservationRefused: the reservation does not exist here or does not fit (names the field).
        ModelNotFound, LaunchTemplateNotFound: what the request names cannot be used in its region.
        RetryableAwsError: throttling/5xx after retries.
    """
    request = load_request(ports, step.request_id)
    buyer = wing(step.platform or request.platform).buyer  # the input lacks it only on an older definition
    history = ports.ledger.history(request.id)
    item = ports.ledger.get(request.id, PURCHASE)
    if item is None:
        require_not_final(history, request.id)
        # Claim first, then check: of two requests adopting one reservation at once, neither is served on
        # it unseen by the other (both are refused; a later one may adopt it once the claimants have ended).
        ports.ledger.claim_brought(str(request.brought), request.id)
        found = brought_reservation(request, ports)
        buyer.preflight(request, ports, found.region)
        offering = OfferingSummary(
            offering_id=BROUGHT_OFFERING_ID,
            region=found.region,
            availability_zone=found.availability_zone or "",
            instance_type=found.instance_type,
            instance_count=found.instance_count,
            start_time=found.start_time,
            end_time=found.end_time,
            duration_hours=int((found.end_time - found.start_time).total_seconds() // 3600),
            upfront_fee_usd=Decimal(0),
        )
        bought = Bought(
            names=buyer.names(found.arn, found.name, found.availability_zone),
            start_time=found.start_time,
            end_time=found.end_time,
            upfront_fee_usd=Decimal(0),  # paid by whoever bought it, not by this request or its team
            offering=offering,
            brought=True,
        )
        item = record_purchase(request, ports, buyer, found.region, bought, chosen=offering)
    output = after_purchase(buyer, request, item, ports, first=State.PURCHASED not in states(history))
    stop_if_released(ports, request.id, "going on after adopting the brought reservation")
    return output


def reconcile_purchase(ports: Ports, request_id: str) -> dict[str, object] | None:
    """The ``PURCHASE`` item of ``request_id``, recording first whatever an intent led to in AWS
    (:func:`~capacity.logic.steps.buy_once.reconcile`); None when nothing was bought (or nothing is recorded).

    Raises:
        RetryableAwsError: AWS could not be asked (money may be behind the intent: retry).
    """
    request = ports.ledger.get_request(request_id)
    if request is None:
        return None
    try:
        return reconcile(request, ports, wing(request.platform).buyer)
    except NameCollision:  # what the intent's name finds belongs to another request: nothing of ours
        return None
