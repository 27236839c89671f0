"""Lambda ``notify``: approval requests (task token), approval outcomes and failures.

In: ``{"kind": "approval_request", "request_id", "task_token", "plan"}`` |
``{"kind": "approval_outcome", "request_id", "approved": false, "reason"}`` |
``{"kind": "failure", "request_id", "error": {"Error", "Cause"}}`` | ``{"kind": "offering_taken",
"request_id", "error", "look"}``. Out: ``{"notified": true, "state"}`` (``offering_taken``: the choose step's
answer, ``{"decision", "wait_seconds", "next_look", ...}``).
Env: LEDGER_TABLE, EVENT_BUS_NAME, SLACK_* (optional).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.notify import NotifyInput
from capacity.logic.steps.notify import notify_step
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    step = parse_model(NotifyInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = notify_step(step, ports).to_json()
    logger.info("notify done", extra={"result": result})
    return result
