"""Lambda ``roll_over``: keeps a reservation served until its ``serve_until`` (issue 17): extend it in
place, else buy the next reservation and move the clients onto it, else tell a person at the lead time.

In: an application event from the bus (``RolloverDue`` from the reservation's one-time schedule,
``ServeUntilChanged``, ``ReservationPurchased``, ``ReservationReady`` (capacity run on demand is bought by
no purchase), ``ReservationExtended``, ``ExtensionFailed``,
``ReservationFailed``), delivered asynchronously, at least once and maybe out of order: each is only news,
the ledger's current state decides. Out: ``{"handled": [{"request_id", "action", "detail", "next_check"}]}``
(:func:`capacity.logic.continuity.rollover.on_event`). Env: LEDGER_TABLE, OFFERINGS_TABLE, EVENT_BUS_NAME,
SCHEDULE_GROUP, RELEASE_TARGET_ARN, SCHEDULER_ROLE_ARN, POLICY_TABLE, SLACK_*.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.logic.continuity.rollover import on_event
from capacity.ports import Ports
from capacity.settings import Settings

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Act on the event's reservation (and its predecessor's, for a successor)."""
    detail = event.get("detail") if isinstance(event, dict) else None
    detail = detail if isinstance(detail, dict) else {}
    if isinstance(detail.get("request_id"), str):
        logger.set_correlation_id(detail["request_id"])
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
    handled = on_event(str(event.get("detail-type") or ""), detail, ports)
    result = {"handled": [item.model_dump(mode="json") for item in handled]}
    logger.info("roll_over done", extra={"result": result})
    return result
