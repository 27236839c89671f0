"""Lambda ``extend_capacity``: extend a reservation in place, exactly once, then confirm its payment.

In: ``{"kind": "purchase", "detail": <ExtensionRequested detail>, "execution"}`` or ``{"kind": "confirm",
"request_id", "extension_id"}``. Out: ``{"request_id", "extension_id", "status", "end_time"}`` (status
``bought``, ``paid`` or ``failed``). Errors by class name: ``ExtensionPending`` (retry),
``PurchaseUnconfirmed``, ``PurchaseInProgress``, ``BudgetExceeded``, ``ExtensionRefused``,
``OfferingExpired``...
Env: LEDGER_TABLE, EVENT_BUS_NAME, SCHEDULE_GROUP, RELEASE_TARGET_ARN, SCHEDULER_ROLE_ARN, SLACK_*.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.logic.continuity.extend import extension_step
from capacity.ports import Ports
from capacity.settings import Settings

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run the purchase or the confirmation step (:func:`capacity.logic.continuity.extend.extension_step`)."""
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
    result = extension_step(event, ports)
    logger.info("extend_capacity done", extra={"result": result})
    return result
