"""Lambda ``purchase_capacity``: buy the chosen training plan exactly once and schedule its release.

In: ``{"request_id", "offering": {...}}``, or ``{"request_id", "action": "adopt"}`` to use the reservation
the request brings (nothing bought; :func:`capacity.logic.steps.purchase.adopt_reservation`).
Out: the reservation in its platform's own names: ``{"platform": "sagemaker", "training_plan_arn",
"training_plan_name", ...}`` or ``{"platform": "ec2", "capacity_reservation_arn", "capacity_reservation_id",
"availability_zone", ...}``, with ``"region", "start_time", "end_time", "upfront_fee_usd"`` (times
``YYYY-MM-DDTHH:MM:SSZ``, fee a USD string).
Env: LEDGER_TABLE, EVENT_BUS_NAME, SCHEDULE_GROUP, RELEASE_TARGET_ARN, SCHEDULER_ROLE_ARN, SLACK_*.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.contracts.purchase import AdoptInput, PurchaseInput
from capacity.logic.steps.purchase import adopt_reservation, purchase_capacity
from capacity.ports import Ports
from capacity.settings import Settings
from capacity.validation import parse_model

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Parse the state input, run the step, return its JSON-safe output."""
    adopt = event.get("action") == "adopt"
    step = parse_model(AdoptInput, event) if adopt else parse_model(PurchaseInput, event)
    logger.set_correlation_id(step.request_id)
    ports = Ports(
        Settings.from_env(
            require=(
                "ledger_table",
                "event_bus_name",
                "schedule_group",
                "release_target_arn",
                "scheduler_role_arn",
            )
        )
    )
    output = (
        adopt_reservation(step, ports) if isinstance(step, AdoptInput) else purchase_capacity(step, ports)
    )
    result = output.to_json()
    logger.info("purchase_capacity done", extra={"result": result})
    return result
