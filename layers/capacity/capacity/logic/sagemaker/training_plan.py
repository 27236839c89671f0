"""The training plan purchase (``platform`` ``sagemaker``): SageMaker's part of the one exactly-once skeleton
(:mod:`capacity.logic.steps.buy_once`).

1. the ``TrainingPlanName`` is derived from the request id (:func:`capacity.naming.training_plan_name`),
   so AWS itself refuses a second plan (``ResourceInUse``), which is adopted;
2. when the intent already existed (a retry, a crash after commit), the plan is looked up first
   (``DescribeTrainingPlan`` by name, then ``ListTrainingPlans``) and adopted if found;
3. an expired offering id triggers exactly one fresh search (same region, duration, window and count).
"""

from __future__ import annotations

from datetime import timedelta

from capacity import messages
from capacity.contracts.purchase import PurchaseOutput, TrainingPlanOutput
from capacity.errors import PurchaseFailed, TrainingPlanNameInUse
from capacity.logic.governance.checks import require_deployable
from capacity.logic.steps.buy_once import Bought, Purchased
from capacity.logic.steps.common import (
    Purchase,
    ensure_owned,
)
from capacity.logic.steps.search import search_plans
from capacity.naming import training_plan_name
from capacity.offerings import Offering, OfferingSummary
from capacity.platforms import SAGEMAKER
from capacity.ports import Ports, SageMakerPort
from capacity.purchases import PurchaseKind
from capacity.ranking import replacement
from capacity.request import ReservationRequest
from capacity.resources import Extension, TrainingPlan, tags_for
from capacity.timeutil import short


class TrainingPlanBuyer:
    """The training plan part of :func:`~capacity.logic.steps.buy_once.buy_once` (``CreateTrainingPlan``)."""

    platform: str = SAGEMAKER.name
    kind: PurchaseKind = "training-plan"
    what = SAGEMAKER.reserved_noun
    # the plan name is derived from the request id: AWS refuses a second one
    unique_call = SAGEMAKER.purchase_name_unique

    def preflight(self, request: ReservationRequest, ports: Ports, region: str) -> None:
        """Every ``model_name`` must exist in the purchase region (``ModelNotFound``;
        :func:`~capacity.logic.governance.checks.require_deployable`)."""
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

    def names(self, arn: str, name: str, zone: str | None) -> dict[str, str]:
        """The plan ``arn`` called ``name`` in the ``PURCHASE`` item's words (a plan has no zone)."""
        return plan_names(arn, name)

    def research(
        self, request: ReservationRequest, ports: Ports, region: str, stale: OfferingSummary
    ) -> OfferingSummary | None:
        """One fresh search like the stale offering's (:func:`research`)."""
        fresh = research(ports.sagemaker(region), request, stale)
        return fresh.summary() if fresh is not None else None

    def purchased(self, request: ReservationRequest, output: PurchaseOutput, ports: Ports) -> Purchased:
        """Released ``release_margin_minutes`` before the end; the plan's name and ARN in ``PURCHASED``.

        Raises:
            TypeError: ``output`` is not a training plan's.
        """
        if not isinstance(output, TrainingPlanOutput):
            raise TypeError(f"a training plan buyer was handed a {output.platform} purchase")
        window = (short(output.start_time) + " UTC", short(output.end_time) + " UTC")
        names = {
            "training_plan_arn": output.training_plan_arn,
            "training_plan_name": output.training_plan_name,
        }
        message = messages.purchased(
            request.id,
            plan_name=output.training_plan_name,
            plan_arn=output.training_plan_arn,
            region=output.region,
            start=window[0],
            end=window[1],
            fee=output.upfront_fee_usd,
        )
        return Purchased(output.end_time - timedelta(minutes=request.release_margin_minutes), names, message)


def _bought(plan: TrainingPlan, offering: OfferingSummary) -> Bought:
    return Bought(
        names=plan_names(plan.arn, plan.name),
        start_time=plan.start_time,
        end_time=plan.end_time,
        upfront_fee_usd=plan.upfront_fee_usd,
        offering=offering,
    )


def plan_names(arn: str, name: str) -> dict[str, str]:
    """A training plan in the ``PURCHASE`` item's words
    (:class:`~capacity.purchases.TrainingPlanPurchase`)."""
    return {"training_plan_arn": arn, "training_plan_name": name}


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


class PlanExtender:
    """Training plans: ``SearchTrainingPlanOfferings(TrainingPlanArn)``, ``ExtendTrainingPlan``,
    ``DescribeTrainingPlanExtensionHistory``."""

    platform: str = SAGEMAKER.name
    what = SAGEMAKER.reserved_noun
    latest_release_before_end = timedelta(0)

    def offerings(self, purchase: Purchase, ports: Ports, hours: int) -> list[Extension]:
        """Extension offerings of the plan."""
        return ports.sagemaker(purchase.region).search_plan_extensions(
            purchase.training_plan().training_plan_arn, hours
        )

    def buy(self, purchase: Purchase, ports: Ports, offering_id: str) -> Extension:
        """``ExtendTrainingPlan``."""
        return ports.sagemaker(purchase.region).extend_training_plan(offering_id)

    def history(self, purchase: Purchase, ports: Ports) -> list[Extension]:
        """The plan's extension history."""
        return ports.sagemaker(purchase.region).plan_extension_history(
            purchase.training_plan().training_plan_arn
        )
