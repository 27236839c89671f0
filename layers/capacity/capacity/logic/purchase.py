"""Step 5, ``purchase_capacity``: buy the training plan exactly once, then schedule its release.

``CreateTrainingPlan`` takes no client token and a plan cannot be cancelled (AWS_FACTS.md), so:

1. a conditional ``PURCHASE_INTENT`` put is recorded before AWS is called;
2. the ``TrainingPlanName`` is derived from the request id (:func:`capacity.naming.training_plan_name`),
   so AWS itself refuses a second plan (``ResourceInUse``), which is adopted;
3. when the intent already existed (a retry, a crash after commit), the plan is looked up first
   (``DescribeTrainingPlan`` by name, then ``ListTrainingPlans``) and adopted if found;
4. an expired offering id triggers exactly one fresh search (same region, duration, window and count) and
   the best offering within budget is bought; otherwise :class:`~capacity.errors.OfferingExpired`;
5. nothing above ``max_upfront_fee_usd`` is ever bought; a re-searched offering above the approval
   threshold must not cost more than the one that was approved.

After the plan exists: ``PURCHASE`` item, ``PURCHASED`` state (money), the one-time release schedule at
``end - release_margin_minutes`` (EventBridge Scheduler), ``ReservationPurchased`` and a Slack message.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from capacity import messages
from capacity.adapters.sagemaker import TrainingPlan, tags_for
from capacity.contracts import PurchaseInput, PurchaseOutput
from capacity.errors import (
    OfferingExpired,
    PurchaseFailed,
    TrainingPlanNameInUse,
)
from capacity.ledger import PURCHASE, PURCHASE_INTENT
from capacity.logic.capacity_blocks import purchase_block
from capacity.logic.checks import require_deployable
from capacity.logic.common import (
    ensure_owned,
    load_request,
    post,
    require_not_final,
    require_within_budget,
    states,
)
from capacity.logic.search import search_plans
from capacity.models import Offering, OfferingSummary, ReservationPurchasedDetail, ReservationRequest, State
from capacity.naming import release_schedule_name, training_plan_name
from capacity.ports import Ports, SageMakerPort
from capacity.pricing import format_usd
from capacity.ranking import replacement
from capacity.timeutil import iso_z, short

RELEASE_REASON = "reservation-end"


def _fee(plan: TrainingPlan, bought: OfferingSummary) -> Decimal:
    """The fee AWS reports for the plan, else the offering's."""
    return plan.upfront_fee_usd if plan.upfront_fee_usd is not None else bought.upfront_fee_usd


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


def _create(
    sagemaker: SageMakerPort, request: ReservationRequest, name: str, offering_id: str
) -> TrainingPlan | str:
    """``CreateTrainingPlan`` (its ARN), or the existing plan called ``name`` on ``ResourceInUse``."""
    try:
        return sagemaker.create_training_plan(name=name, offering_id=offering_id, tags=tags_for(request.id))
    except TrainingPlanNameInUse as exc:
        plan = _adopt(sagemaker, name, request.id)
        if plan is None:
            raise PurchaseFailed(f"training plan name {name} is in use but the plan cannot be found") from exc
        return plan


def _buy(
    sagemaker: SageMakerPort, request: ReservationRequest, offering: OfferingSummary, name: str
) -> tuple[TrainingPlan | str, OfferingSummary]:
    """Create the plan (or adopt it on ``ResourceInUse``), or once a fresh search's replacement when the
    offering expired. Returns (plan or ARN, offering bought)."""
    try:
        return _create(sagemaker, request, name, offering.offering_id), offering
    except OfferingExpired as exc:
        fresh = research(sagemaker, request, offering)
        if fresh is None:
            raise OfferingExpired(
                f"offering {offering.offering_id} expired and a fresh search in {sagemaker.region} found no "
                f"{request.instance_count} x {request.instance_type} offering for {request.duration_hours} h "
                f"within the budget {format_usd(request.max_upfront_fee_usd)}; nothing was bought"
            ) from exc
        return _create(sagemaker, request, name, fresh.offering_id), fresh.summary()


def purchase_capacity(step: PurchaseInput, ports: Ports) -> PurchaseOutput:
    """Buy (or adopt) the training plan for ``step.offering``, exactly once.

    Raises:
        ReservationNotFound: the request is not recorded.
        ReservationCancelled: the reservation was cancelled (or finished) before the purchase.
        ModelNotFound: a ``model_name`` of the request names no model in the offering's region.
        BudgetExceeded: the offering costs more than ``max_upfront_fee_usd``.
        OfferingExpired: the offering expired and one fresh search found nothing buyable.
        QuotaExceeded, PurchaseFailed: AWS refused the purchase.
        RetryableAwsError: throttling/5xx after retries.
    """
    request = load_request(ports, step.request_id)
    if request.platform == "ec2":
        return purchase_block(step, request, ports)
    ledger = ports.ledger
    name = training_plan_name(request.id)
    existing = ledger.get(request.id, PURCHASE)
    history = ledger.history(request.id)
    if existing is None:
        require_not_final(history, request.id)
        require_deployable(request, ports, step.offering.region)
        require_within_budget(request, step.offering)
        created, intent = ledger.put_once(
            request.id,
            PURCHASE_INTENT,
            {
                "actor": ports.actor,
                "training_plan_name": name,
                "region": step.offering.region,
                "offering": step.offering.model_dump(mode="json"),
            },
        )
        region = str(intent.get("region", step.offering.region))
        sagemaker = ports.sagemaker(region)
        plan: TrainingPlan | str | None = None if created else _adopt(sagemaker, name, request.id)
        bought = step.offering
        if plan is None:
            plan, bought = _buy(sagemaker, request, step.offering, name)
        if isinstance(plan, str):  # just created: read it back for the real times and fee
            plan = sagemaker.describe_training_plan(name) or TrainingPlan(
                arn=plan,
                name=name,
                status="Pending",
                status_message=None,
                start_time=bought.start_time,
                end_time=bought.end_time,
                upfront_fee_usd=bought.upfront_fee_usd,
                total_instance_count=None,
                instance_type=bought.instance_type,
            )
        _, existing = ledger.put_once(
            request.id,
            PURCHASE,
            {
                "actor": ports.actor,
                "training_plan_arn": plan.arn,
                "training_plan_name": plan.name,
                "region": region,
                "start_time": iso_z(plan.start_time or bought.start_time),
                "end_time": iso_z(plan.end_time or bought.end_time),
                "upfront_fee_usd": f"{_fee(plan, bought):f}",
                "offering_id": bought.offering_id,
                "instance_type": request.instance_type,
                "instance_count": request.instance_count,
                "re_searched": bought.offering_id != step.offering.offering_id,
            },
        )
    return _after_purchase(request, existing, ports, first=State.PURCHASED not in states(history))


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
