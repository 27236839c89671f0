"""Lambda ``launch_instances`` (``platform`` ``ec2``): start the instances in the active capacity block.

In: ``{"request_id", "action": "launch" | "status", "attempt"?}``. Out: ``{"status": "Running" | "Pending",
"capacity_reservation_id", "availability_zone", "instance_ids", "next_wait_seconds", "attempt"}``. Raises
``CapacityUnavailable``, ``LaunchFailed``, ``ReservationCancelled``. Env: LEDGER_TABLE, EVENT_BUS_NAME,
SLACK_*.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.serving import LaunchInput
from capacity.logic.ec2.launch import launch_instances
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    step = parse_model(LaunchInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = launch_instances(step, ports).to_json()
    logger.info("launch_instances done", extra={"result": result})
    return result
