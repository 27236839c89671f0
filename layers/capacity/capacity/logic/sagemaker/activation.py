"""A training plan's way to ``Active`` (``wait_for_activation`` for ``platform`` ``sagemaker``): one
``DescribeTrainingPlan`` poll. Status (AWS_FACTS.md): ``Pending`` (payment) -> ``Scheduled`` -> ``Active`` ->
``Expired``, or ``Failed``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from capacity import messages
from capacity.contracts.activation import ActivationInput
from capacity.errors import PlanFailed
from capacity.events import TrainingPlanActiveDetail
from capacity.logic.steps.common import Sighting, void_purchase
from capacity.ports import Ports
from capacity.resources import SlackMessage
from capacity.timeutil import short


def plan_activation(step: ActivationInput, ports: Ports) -> Sighting:
    """Poll the plan once (``DescribeTrainingPlan``).

    Returns:
        What :func:`capacity.logic.steps.common.record_activation` records: ``status`` (AWS's), the plan's
        name (and ARN once ``Active``) as the ledger detail, and ``InUseInstanceCount`` (the cost report's
        usage timeline, source ``training-plan``).

    Raises:
        PlanFailed: the plan is ``Failed`` or ``Expired`` (or cannot be found); a voided purchase is
            recorded when AWS charged nothing.
    """
    held = step.training_plan()
    sagemaker = ports.sagemaker(held.region)
    plan = sagemaker.describe_training_plan(held.training_plan_name)
    if plan is None:
        raise PlanFailed(f"training plan {held.training_plan_name} does not exist in {held.region}")
    if plan.status in ("Failed", "Expired"):
        void_purchase(ports, step.request_id, plan.status)
        message = f": {plan.status_message}" if plan.status_message else ""
        raise PlanFailed(f"training plan {plan.name} is {plan.status}{message}")

    def status_message(status: str) -> Callable[[datetime | None, datetime | None], SlackMessage]:
        return lambda start, end: messages.plan_status(
            step.request_id,
            plan_name=plan.name,
            status=status,
            start=short(start) + " UTC" if start else "?",
            end=short(end) + " UTC" if end else "?",
        )

    return Sighting(
        status=plan.status,
        state=plan.status,
        payment_state="Pending (payment)" if plan.status == "Pending" else None,
        what=f"training plan {plan.name}",
        active_event=lambda start, end: TrainingPlanActiveDetail(
            request_id=step.request_id,
            region=held.region,
            training_plan_name=plan.name,
            start_time=start,
            end_time=end,
        ),
        arn=plan.arn,
        start=plan.start_time,
        end=plan.end_time,
        scheduled_detail={"training_plan_name": plan.name},
        active_detail={"training_plan_name": plan.name, "training_plan_arn": plan.arn},
        scheduled_message=status_message("Scheduled"),
        active_message=status_message("Active (Scheduled -> Active)"),
        in_use_instance_count=plan.in_use_instance_count,
    )
