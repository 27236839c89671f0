"""Step 5, ``purchase_capacity``: buy the training plan (or capacity block) exactly once, then schedule its
release.

The exactly-once protocol is :mod:`capacity.logic.buy_once`'s, for both platforms; the training plan's part
(:class:`TrainingPlanBuyer`):

1. the ``TrainingPlanName`` is derived from the request id (:func:`capacity.naming.training_plan_name`),
   so AWS itself refuses a second plan (``ResourceInUse``), which is adopted;
2. when the intent already existed (a retry, a crash after commit), the plan is looked up first
   (``DescribeTrainingPlan`` by name, then ``ListTrainingPlans``) and adopted if found;
3. an expired offering id triggers exactly one fresh search (same region, duration, window and count) and
   the best offering within budget is bought; otherwise :class:`~capacity.errors.OfferingExpired`;
4. nothing above ``max_upfront_fee_usd`` is ever bought; a re-searched offering above the approval
   threshold must not cost more than the one that was approved.

A request that brings its own reservation (``training_plan_arn``, ``capacity_reservation_id``; issue 17)
is not bought: :func:`adopt_reservation` checks it (:func:`~capacity.logic.checks.brought_reservation`)
and records it as the ``PURCHASE`` with ``upfront_fee_usd`` 0 and ``brought: true``, with no intent and
no team hold (:func:`~capacity.logic.policy.purchase_check` is never called); the rest is the same.

After the plan exists: ``PURCHASE`` item, ``PURCHASED`` state (money), the one-time release schedule at
``end - release_margin_minutes`` (EventBridge Scheduler), ``ReservationPurchased`` and a Slack message.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from capacity import messages
from capacity.contracts import AdoptInput, PurchaseInput, PurchaseOutput
from capacity.errors import NameCollision, PurchaseFailed, TrainingPlanNameInUse
from capacity.ledger import PURCHASE
from capacity.logic.buy_once import Bought, Buyer, buy_once, reconcile, record_purchase
from capacity.logic.capacity_blocks import CapacityBlockBuyer
from capacity.logic.checks import brought_reservation, require_deployable
from capacity.logic.common import (
    ensure_owned,
    load_request,
    post,
    require_not_final,
    settled_history,
    states,
    stop_if_released,
)
from capacity.logic.search import search_plans
from capacity.models import Offering, OfferingSummary, ReservationPurchasedDetail, ReservationRequest, State
from capacity.naming import release_schedule_name, training_plan_name
from capacity.ports import Ports, SageMakerPort
from capacity.ranking import replacement
from capacity.resources import TrainingPlan, tags_for
from capacity.timeutil import iso_z, short

RELEASE_REASON = "reservation-end"


class TrainingPlanBuyer:
    """The training plan part of :func:`~capacity.logic.buy_once.buy_once` (``CreateTrainingPlan``)."""

    platform = "sagemaker"
    what = "training plan"
    unique_call = True  # the plan name is derived from the request id: AWS refuses a second one

    def preflight(self, request: ReservationRequest, ports: Ports, region: str) -> None:
        """Every ``model_name`` must exist in the purchase region (``ModelNotFound``;
        :func:`~capacity.logic.checks.require_deployable`)."""
        require_deployable(request, ports, region)

    def find(
        self, request: ReservationRequest, ports: Ports, region: str, offering: OfferingSummary
    ) -> Bought | None:
        """The plan called :func:`~capacity.naming.training_plan_name` of the request, if it is this
        request's (``NameCollision`` if another's)."""
        plan = _adopt(ports.sagemaker(region), training_plan_name(request.id), request.id)
        return None if plan is None else _bought(plan, offering)

    def buy(
        self, request: ReservationRequest, ports: Ports, region: str, offering: OfferingSummary
    ) -> Bought:
        """``CreateTrainingPlan`` (tagged with the request id); ``ResourceInUse`` adopts the existing plan."""
        sagemaker = ports.sagemaker(region)
        name = training_plan_name(request.id)
        try:
            created = sagemaker.create_training_plan(
                name=name, offering_id=offering.offering_id, tags=tags_for(request.id)
            )
        except TrainingPlanNameInUse as exc:
            plan = _adopt(sagemaker, name, request.id)
            if plan is None:
                raise PurchaseFailed(
                    f"training plan name {name} is in use but the plan cannot be found"
                ) from exc
            return _bought(plan, offering)
        # Read it back for the real times and fee.
        plan = sagemaker.describe_training_plan(name) or TrainingPlan(
            arn=created,
            name=name,
            status="Pending",
            status_message=None,
            start_time=offering.start_time,
            end_time=offering.end_time,
            upfront_fee_usd=offering.upfront_fee_usd,
            total_instance_count=None,
            instance_type=offering.instance_type,
        )
        return _bought(plan, offering)

    def research(
        self, request: ReservationRequest, ports: Ports, region: str, stale: OfferingSummary
    ) -> OfferingSummary | None:
        """One fresh search like the stale offering's (:func:`research`)."""
        fresh = research(ports.sagemaker(region), request, stale)
        return fresh.summary() if fresh is not None else None

    def after(
        self, request: ReservationRequest, item: dict[str, object], ports: Ports, *, first: bool
    ) -> PurchaseOutput:
        """Release schedule, ``PURCHASED`` (money), ``ReservationPurchased``, message."""
        return _after_purchase(request, item, ports, first=first)


def _bought(plan: TrainingPlan, offering: OfferingSummary) -> Bought:
    return Bought(
        arn=plan.arn,
        name=plan.name,
        start_time=plan.start_time,
        end_time=plan.end_time,
        upfront_fee_usd=plan.upfront_fee_usd,
        offering=offering,
        extra={},
    )


def _adopt(sagemaker: SageMakerPort, name: str, request_id: str) -> TrainingPlan | None:
    """The existing plan called ``name``, if it is this request's (``NameCollision`` if another's)."""
    plan = sagemaker.describe_training_plan(name) or sagemaker.find_training_plan(name)
    if plan is not None:
        ensure_owned(sagemaker, plan.arn, request_id, "training plan")
    return plan


def research(
    sagemaker: SageMakerPort, request: ReservationRequest, stale: OfferingSummary
) -> Offering | None:
    """One fresh search like the stale offering's; the best feasible offering we may buy, or None.

    May buy: fee within ``max_upfront_fee_usd`` and, when above ``approval_above_usd``, not more than
    the stale offering's fee (the amount that was approved or under the threshold).
    """
    found = search_plans(
        sagemaker, request, duration_hours=request.duration_hours, count=request.instance_count
    )
    return replacement(found, request, stale)


BUYERS: dict[str, Buyer] = {"sagemaker": TrainingPlanBuyer(), "ec2": CapacityBlockBuyer()}
"""The buyer of each platform (``ReservationRequest.platform``)."""


def purchase_capacity(step: PurchaseInput, ports: Ports) -> PurchaseOutput:
    """Buy (or adopt) the training plan or capacity block for ``step.offering``, exactly once
    (:func:`~capacity.logic.buy_once.buy_once`).

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
    request = load_request(ports, step.request_id)
    return buy_once(step, request, ports, BUYERS[request.platform])


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
    buyer = BUYERS[request.platform]
    history = settled_history(ports, request.id)
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
        extra: dict[str, object] = {"brought": True}
        if request.platform == "ec2":
            extra |= {"capacity_reservation_id": found.name, "availability_zone": found.availability_zone}
        bought = Bought(
            arn=found.arn,
            name=found.name,
            start_time=found.start_time,
            end_time=found.end_time,
            upfront_fee_usd=Decimal(0),  # paid by whoever bought it, not by this request or its team
            offering=offering,
            extra=extra,
        )
        item = record_purchase(request, ports, buyer, found.region, bought, chosen=offering)
    output = buyer.after(request, item, ports, first=State.PURCHASED not in states(history))
    stop_if_released(ports, request.id, "going on after adopting the brought reservation")
    return output


def reconcile_purchase(ports: Ports, request_id: str) -> dict[str, object] | None:
    """The ``PURCHASE`` item of ``request_id``, recording first whatever an intent led to in AWS
    (:func:`~capacity.logic.buy_once.reconcile`); None when nothing was bought (or nothing is recorded).

    Raises:
        RetryableAwsError: AWS could not be asked (money may be behind the intent: retry).
    """
    request = ports.ledger.get_request(request_id)
    if request is None:
        return None
    try:
        return reconcile(request, ports, BUYERS[request.platform])
    except NameCollision:  # what the intent's name finds belongs to another request: nothing of ours
        return None


def _after_purchase(
    request: ReservationRequest, item: dict[str, object], ports: Ports, *, first: bool
) -> PurchaseOutput:
    output = PurchaseOutput.from_purchase_item(item)
    # The release is scheduled as soon as the money is spent, so no later crash can leak an endpoint.
    ports.scheduler.schedule_release(
        name=release_schedule_name(request.id),
        at=output.end_time - timedelta(minutes=request.release_margin_minutes),
        request_id=request.id,
        reason=RELEASE_REASON,
    )
    if first:
        ports.events.put(
            "ReservationPurchased",
            ReservationPurchasedDetail(request_id=request.id, **output.model_dump()),
            resources=[output.training_plan_arn],
        )
    written = ports.ledger.append(
        request.id,
        State.PURCHASED,
        actor=ports.actor,
        detail={
            "training_plan_arn": output.training_plan_arn,
            "training_plan_name": output.training_plan_name,
            "region": output.region,
            "start_time": iso_z(output.start_time),
            "end_time": iso_z(output.end_time),
            "offering_id": item.get("offering_id"),
            "re_searched": bool(item.get("re_searched")),
            "brought": bool(item.get("brought")),
            "release_at": iso_z(output.end_time - timedelta(minutes=request.release_margin_minutes)),
        },
        money_usd=output.upfront_fee_usd,
        once=True,
    )
    if written is not None:
        post(
            ports,
            messages.purchased(
                request.id,
                plan_name=output.training_plan_name,
                plan_arn=output.training_plan_arn,
                region=output.region,
                start=short(output.start_time) + " UTC",
                end=short(output.end_time) + " UTC",
                fee=output.upfront_fee_usd,
            ),
        )
    return output
