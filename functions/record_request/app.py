"""Lambda ``record_request``: validate a ``ReservationRequested`` event and record the request once.

In: the EventBridge event (``detail-type`` ReservationRequested, ``detail`` ``{"schema_version": 1,
"request": {...}}``). Out: ``{"request_id", "duplicate", "regions", "dry_run"}``; ``duplicate`` true means
another delivery already started this reservation (the workflow ends quietly). Raises ``InvalidRequest``
naming each bad field. Env: LEDGER_TABLE.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.logic.steps.intake import record_request
from capacity.ports import Ports
from capacity.settings import Settings

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Validate and record the request; return the small summary the workflow branches on."""
    ports = Ports(Settings.from_env(require=("ledger_table",)))
    result = record_request(event, ports).to_json()
    logger.set_correlation_id(result["request_id"])
    logger.info("request recorded", extra={"result": result})
    return result
