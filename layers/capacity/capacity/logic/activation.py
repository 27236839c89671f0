"""Step 6, ``wait_for_activation``: one ``DescribeTrainingPlan`` poll.

The state machine calls this step right after the purchase until the payment is through (``Pending`` ->
``Scheduled``: a failed payment is known in minutes, not at the start), then ``Wait`` s until the plan's
start time (so the cost does not grow with the lead time) and calls it again with growing intervals.
Status (AWS_FACTS.md): ``Pending`` (payment) -> ``Scheduled`` -> ``Active`` -> ``Expired``, or ``Failed``.
Deadlines: the payment within 12 hours of the purchase (EC2 documents payment failures "after up to 12
hours"; SageMaker documents none, so the same bound is used), activation within 2 hours of the start.
"""

from __future__ import annotations

from capacity import messages
from capacity.contracts import ActivationInput, ActivationOutput, backoff_seconds
from capacity.errors import PlanFailed
from capacity.logic.capacity_blocks import block_activation
from capacity.logic.common import (
    check_activation_deadlines,
    load_purchase,
    record_activation,
    states,
    stop_if_released,
    void_purchase,
)
from capacity.logic.costs import record_usage
from capacity.ports import Ports
from capacity.timeutil import iso_z, short


def wait_for_activation(step: ActivationInput, ports: Ports) -> ActivationOutput:
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
    request = ports.ledger.get_request(step.request_id)
    if request is not None and request.platform == "ec2":
        return block_activation(step, ports)
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
    record_activation(
        ports,
        step,
        states(history),
        plan.status,
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
    if plan.status != "Active":
        check_activation_deadlines(
            history,
            ports.clock(),
            what=f"training plan {plan.name}",
            state=plan.status,
            payment_state="Pending (payment)" if plan.status == "Pending" else None,
            start=start,
        )
    return ActivationOutput(
        status=plan.status,
        attempt=step.attempt + 1,
        next_wait_seconds=backoff_seconds(step.attempt, base=60, cap=900),
    )
