"""Step 6, ``wait_for_activation``: one poll of the reservation bought, routed by platform.

The state machine calls this step right after the purchase until the payment is through (``Pending`` ->
``Scheduled``: a failed payment is known in minutes, not at the start), then ``Wait`` s until the plan's
start time (so the cost does not grow with the lead time) and calls it again with growing intervals.
The training plan's statuses (AWS_FACTS.md) are the vocabulary of both platforms: ``Pending`` (payment) ->
``Scheduled`` -> ``Active``; each wing only reads its reservation and says what it saw (a
:class:`~capacity.logic.steps.common.Sighting`); the rules both share (each state recorded once, the
deadlines) are :func:`capacity.logic.steps.common.record_activation` and
:func:`capacity.logic.steps.common.check_activation_deadlines`. Deadlines: the payment within 12 hours of the
purchase (EC2 documents payment failures "after up to 12 hours"; SageMaker documents none, so the same bound
is used), activation within 2 hours of the start.
"""

from __future__ import annotations

from capacity.contracts.activation import ActivationInput, ActivationOutput
from capacity.logic.governance.costs import record_usage
from capacity.logic.steps.common import record_activation
from capacity.logic.wings import wing
from capacity.platforms import DEFAULT
from capacity.ports import Ports


def wait_for_activation(step: ActivationInput, ports: Ports) -> ActivationOutput:
    """Poll the reservation once (a training plan:
    :func:`~capacity.logic.sagemaker.activation.plan_activation`; a capacity block:
    :func:`~capacity.logic.ec2.activation.block_activation`); record ``SCHEDULED``/``ACTIVE`` the first time
    each is seen.

    Returns:
        ``status`` in the training plan spelling (``Pending``, ``Scheduled``, ``Active``), ``attempt + 1``,
        ``next_wait_seconds`` = 60 * 2**attempt, at most 900, and ``platform``.

    Raises:
        PlanFailed: the reservation failed, expired or cannot be found, or its payment is 12 hours late.
        ActivationTimeout: not active two hours after its start time.
        ReservationCancelled: the reservation is releasing or final (cancelled, released, failed...).
        RetryableAwsError: throttling/5xx after retries.
    """
    platform = step.platform or (step.purchase.platform if step.purchase is not None else None)
    if platform is None:  # an execution started on a definition that did not carry it: ask the ledger
        request = ports.ledger.get_request(step.request_id)
        platform = request.platform if request is not None else DEFAULT.name
    sighting = wing(platform).activation(step, ports)
    output = record_activation(ports, step, sighting, platform=platform)
    if output.status == "Active" and sighting.in_use_instance_count is not None:
        # the plan's own count of its instances in use (the cost report's timeline)
        record_usage(ports, step.request_id, sighting.in_use_instance_count, source="training-plan")
    return output
