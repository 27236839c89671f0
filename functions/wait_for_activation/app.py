"""Lambda ``wait_for_activation``: one poll of the reservation bought (``DescribeTrainingPlan``, or
``DescribeCapacityReservations`` for a capacity block) after the purchase and after the start time.

In: ``{"request_id", "platform", "purchase": {...purchase_capacity's output}, "attempt"}`` (an execution
started before issue 28 passes ``region`` and ``training_plan_name`` instead). Out: ``{"status", "attempt",
"next_wait_seconds", "platform"}`` (60 * 2**attempt, at most 900). Raises ``PlanFailed`` (Failed/Expired) and
``ActivationTimeout`` (not Active 2 h after the start). Env: LEDGER_TABLE, EVENT_BUS_NAME, SLACK_*.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.activation import ActivationInput
from capacity.logic.steps.activation import wait_for_activation
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    step = parse_model(ActivationInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = wait_for_activation(step, ports).to_json()
    logger.info("wait_for_activation done", extra={"result": result})
    return result
