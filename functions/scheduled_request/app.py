"""Lambda ``scheduled_request``: one firing of a recurring reservation schedule (EventBridge Scheduler).

In: the schedule's target ``Input`` after Scheduler filled in ``<aws.scheduler.scheduled-time>``:
``{"schedule": {<ScheduleDefinition>}, "scheduled_time": "2026-12-07T11:30:00Z", "created_by": ...}``.
Puts ``ReservationRequested`` for ``request_id = <name>-<YYYY-MM-DD>`` once (Powertools idempotency, then
the ledger). Out: ``{"request_id", "status"}`` (``REQUESTED``, or ``DUPLICATE`` when another firing on the
same date submitted it). Raises ``InvalidRequest`` when the run's request is not valid (Scheduler retries,
then drops it). Env: LEDGER_TABLE, EVENT_BUS_NAME, IDEMPOTENCY_TABLE.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.logic.doors.schedules import run_schedule
from capacity.ports import Ports
from capacity.settings import Settings

logger = Logger()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Submit this firing's reservation request."""
    ports = Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))
    result = run_schedule(event, ports, persistence=ports.idempotency_store(), lambda_context=context)
    logger.set_correlation_id(result["request_id"])
    logger.info("scheduled request submitted", extra={"result": result})
    return result
