"""Lambda ``capacity_block_events``: an EC2 capacity block expiration warning becomes ``ReleaseRequested``.

In: the EventBridge event (``source`` ``aws.ec2``, ``detail-type`` ``Capacity Block Expiration Warning`` or
``Capacity Block Reservation Expiration Warning``, ``detail.capacity-reservation-id``). Out:
``{"request_id": <id> | null, "released": bool}`` (null for a block the orchestrator did not buy). Env:
LEDGER_TABLE, EVENT_BUS_NAME.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.logic.ec2.expiry import expiry_warning
from capacity.ports import Ports
from capacity.settings import Settings

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Map the block to its request and ask for the release."""
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = expiry_warning(event, ports)
    logger.info("capacity block event handled", extra={"result": result})
    return result
