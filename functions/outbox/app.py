"""Lambda ``outbox``: a recorded decision always takes effect (issue 28, point 5).

In: a batch of the ledger's DynamoDB stream records (``{"Records": [{"eventName", "dynamodb": {"Keys",
"NewImage", "SequenceNumber"...}}]}``), already filtered by the event source mapping's ``FilterCriteria`` to
the decision items (:data:`capacity.logic.steps.outbox.FILTERS`), in write order per reservation, at least
once. Out: ``{"carried": [{"request_id", "decision", "effect", "outcome"}]}``
(:func:`capacity.logic.steps.outbox.carry_out`). An error fails the batch: Lambda tries it again (bisected),
then sends its metadata to ``OutboxFailuresQueue``. Env: LEDGER_TABLE, EVENT_BUS_NAME.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.logic.steps.outbox import carry_out
from capacity.ports import Ports
from capacity.settings import Settings

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Carry out the effect of each decision item of the batch, in order."""
    images = [
        record.dynamodb.raw_event["NewImage"]
        for record in DynamoDBStreamEvent(event).records
        if record.dynamodb is not None and "NewImage" in record.dynamodb.raw_event
    ]
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = carry_out(images, ports).model_dump(mode="json")
    logger.info("outbox batch carried out", extra={"result": result})
    return result
