"""A training plan's way to ``Active`` (``wait_for_activation`` for ``platform`` ``sagemaker``): one
``DescribeTrainingPlan`` poll. Status (AWS_FACTS.md): ``Pending`` (payment) -> ``Scheduled`` -> ``Active`` ->
``Expired``, or ``Failed``.
"""

from __future__ import annotations

from capacity import messages
from capacity.contracts import ActivationInput, ActivationOutput
from capacity.errors import PlanFailed
from capacity.logic.common import (
    load_purchase,
    record_activation,
    stop_if_released,
    void_purchase,
)
from capacity.logic.costs import record_usage
from capacity.ports import Ports
from capacity.timeutil import iso_z, short


def plan_activation(step: ActivationInput, ports: Ports) -> ActivationOutput:
    """Poll the plan once; record ``SCHEDULED``/``ACTIVE`` the first time each is seen, and an Active plan's
    ``InUseInstanceCount`` as a usage observation (:func:`capacity.logic.costs.record_usage`, source
    ``training-plan``).

    When the first poll already finds the plan ``Active`` (the usual case: the workflow waits until the
    start time), ``SCHEDULED`` is recorded just before ``ACTIVE`` with ``observed: false`` so the
    history shows the documented order without pretending to have seen it.

    Returns:
        ``status`` (AWS's), ``attempt + 1`` and ``next_wait_seconds`` = 60 * 2**attempt, at most 900.

    Raises:
        PlanFailed: the plan is ``Failed`` or ``Expired`` (or cannot be found).
        PlanFailed: still ``Pending`` (payment) 12 hours after the purchase.
        ActivationTimeout: not ``Active`` two hours after its start time.
        ReservationCancelled: the reservation is releasing or final (cancelled, released, failed...).
        RetryableAwsError: throttling/5xx after retries.
    """
    sagemaker = ports.sagemaker(step.region)
    plan = sagemaker.describe_training_plan(step.training_plan_name)
    if plan is None:
        raise PlanFailed(f"training plan {step.training_plan_name} does not exist in {step.region}")
    if plan.status in ("Failed", "Expired"):
        void_purchase(ports, step.request_id, plan.status)
        message = f": {plan.status_message}" if plan.status_message else ""
        raise PlanFailed(f"training plan {plan.name} is {plan.status}{message}")

    purchase = load_purchase(ports, step.request_id)
    start = plan.start_time or (purchase.start_time if purchase else None)
    end = plan.end_time or (purchase.end_time if purchase else None)
    times = {"start_time": iso_z(start) if start else None, "end_time": iso_z(end) if end else None}
    window = (short(start) + " UTC" if start else "?", short(end) + " UTC" if end else "?")
    history = stop_if_released(ports, step.request_id, f"recording plan status {plan.status}", release=False)
    output = record_activation(
        ports,
        step,
        history,
        plan.status,
        platform="sagemaker",
        what=f"training plan {plan.name}",
        state=plan.status,
        payment_state="Pending (payment)" if plan.status == "Pending" else None,
        name=plan.name,
        arn=plan.arn,
        start=start,
        end=end,
        scheduled=(
            {"training_plan_name": plan.name, **times},
            messages.plan_status(
                step.request_id, plan_name=plan.name, status="Scheduled", start=window[0], end=window[1]
            ),
        ),
        active=(
            {"training_plan_name": plan.name, "training_plan_arn": plan.arn, **times},
            messages.plan_status(
                step.request_id,
                plan_name=plan.name,
                status="Active (Scheduled -> Active)",
                start=window[0],
                end=window[1],
            ),
        ),
    )
    if plan.status == "Active":  # the plan's own count of its instances in use (the cost report's timeline)
        record_usage(ports, step.request_id, plan.in_use_instance_count, source="training-plan")
    return output
