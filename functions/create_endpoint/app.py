"""Lambda ``create_endpoint``: the endpoint config and endpoint on the training plan, then polls.

In: ``{"request_id", "action": "create" | "status", "attempt"?}``. Out: ``{"endpoint_name", "status",
"next_wait_seconds", "attempt"}``. Raises ``EndpointFailed`` with SageMaker's ``FailureReason``.
Env: LEDGER_TABLE, ENDPOINT_EXECUTION_ROLE_ARN.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.serving import EndpointInput
from capacity.logic.sagemaker.deploy import create_endpoint
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    step = parse_model(EndpointInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(Settings.from_env(require=("ledger_table", "endpoint_execution_role_arn")))
    result = create_endpoint(step, ports).to_json()
    logger.info("create_endpoint done", extra={"result": result})
    return result
