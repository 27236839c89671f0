"""Lambda ``search_offerings``: search one region's training plan offerings (a Map iteration).

In: ``{"request_id", "region"}``. Out: ``{"region", "count", "feasible", "quota_error"}``; the offerings
themselves go to OFFERINGS_TABLE, never into the state payload. A quota error (``ResourceLimitExceeded``)
is reported in ``quota_error``, not raised. Env: LEDGER_TABLE, OFFERINGS_TABLE.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.finding import SearchInput
from capacity.logic.steps.search import search_offerings
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    step = parse_model(SearchInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(Settings.from_env(require=("ledger_table", "offerings_table")))
    result = search_offerings(step, ports).to_json()
    logger.info("search_offerings done", extra={"result": result})
    return result
