"""Lambda ``choose_offering``: rank the stored offerings and decide (buy, ask, reject, report).

In: ``{"request_id", "searches": [<search_offerings outputs>]}``. Out: ``{"decision", "reason",
"offering" | null, "approval_timeout_seconds"}`` with ``decision`` one of NO_OFFERING, REJECTED, DRY_RUN,
APPROVAL_REQUIRED, PURCHASE. Env: LEDGER_TABLE, OFFERINGS_TABLE, EVENT_BUS_NAME, SLACK_* (optional).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.finding import ChooseInput
from capacity.logic.steps.choose import choose_offering
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    step = parse_model(ChooseInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(Settings.from_env(require=("ledger_table", "offerings_table", "event_bus_name")))
    result = choose_offering(step, ports).to_json()
    logger.info("choose_offering done", extra={"result": result})
    return result
