"""Lambda ``on_demand``: on-demand first (then spot for ``spot-ok``), region by region, before reserving.

In: ``{"request_id", "action": "try" | "status", "attempt"?}``. Out: ``{"outcome": "skipped" | "unavailable" |
"launched" | "running", "region", "market", "instance_ids", "next_wait_seconds", "attempt"}``
(``skipped``/``unavailable``: the workflow goes on to reserve). Raises ``LaunchFailed``,
``ReservationCancelled``. Env: LEDGER_TABLE, EVENT_BUS_NAME, SCHEDULE_GROUP, RELEASE_TARGET_ARN,
SCHEDULER_ROLE_ARN, SLACK_*.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.on_demand import OnDemandInput
from capacity.logic.steps.on_demand import try_on_demand
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    step = parse_model(OnDemandInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = try_on_demand(step, ports).to_json()
    logger.info("on_demand done", extra={"result": result})
    return result
