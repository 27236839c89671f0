"""Lambda ``scale_components``: acts on this application's CloudWatch alarms (scale to zero and back).

In: the ``CloudWatch Alarm State Change`` event (``source`` ``aws.cloudwatch``) delivered by the rule that
matches alarm names starting ``capacity-orchestrator/``. Out: ``{"action", "reason", "request_id",
"model", "from_copies", "to_copies", "failed_requests", "duplicate"}`` (see
:func:`capacity.logic.sagemaker.scaling.scale_components`). Env: LEDGER_TABLE, EVENT_BUS_NAME, SLACK_*.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.logic.sagemaker.scaling import scale_components
from capacity.ports import Ports
from capacity.settings import Settings

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the alarm event, act on it, return what was done and why."""
    detail = event.get("detail") if isinstance(event, dict) else None
    if isinstance(detail, dict) and isinstance(detail.get("alarmName"), str):
        logger.set_correlation_id(detail["alarmName"])
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = scale_components(event, ports).to_json()
    logger.info("scale_components done", extra={"result": result})
    return result
