"""Lambda ``release_capacity``: delete components, endpoint and config, verify, report the cost; after a
failed attempt, name what is left and schedule the next one.

In: ``{"request_id", "action": "begin" | "delete_scaling" | "delete_alarms" | "delete_components" |
"delete_endpoint" | "delete_endpoint_config" | "finish" | "attempt_failed", "reason"?, "error"?,
"attempt_id"?}``. Out: ``{"done", "remaining", "next_wait_seconds", "already_released", "summary" | null,
"leftovers", "retry_at"}``. Safe to run twice and when nothing was ever created.
Env: LEDGER_TABLE, EVENT_BUS_NAME, SCHEDULE_GROUP (to delete the release schedule early, and to schedule
the next attempt with SCHEDULER_ROLE_ARN and RELEASE_TARGET_ARN), SLACK_*.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.release import ReleaseInput
from capacity.logic.steps.release import release_capacity
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    step = parse_model(ReleaseInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = release_capacity(step, ports).to_json()
    logger.info("release_capacity done", extra={"result": result})
    return result
