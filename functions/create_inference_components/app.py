"""Lambda ``create_inference_components``: one inference component per model, then polls.

In: ``{"request_id", "action": "create" | "status", "attempt"?}``. Out: ``{"status": "InService" |
"Creating", "component_names", "next_wait_seconds", "attempt"}``. All InService records READY and puts
``ReservationReady``; a Failed component raises ``ComponentFailed``. Env: LEDGER_TABLE, EVENT_BUS_NAME.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.serving import ComponentsInput
from capacity.logic.sagemaker.deploy import create_inference_components
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    step = parse_model(ComponentsInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = create_inference_components(step, ports).to_json()
    logger.info("create_inference_components done", extra={"result": result})
    return result
