"""Lambda ``slack``: the Slack app's door (API Gateway REST proxy, no IAM auth: Slack signs instead).

Routes: ``POST /slack/commands`` (the ``/gpu`` slash command) and ``POST /slack/interactions`` (the
approval buttons); both verify the signature first, then :mod:`capacity.logic.doors.slack_door` answers.
401 ``{"message"}`` for a bad signature, a stale timestamp or a replay; 200 otherwise (Slack shows the
body of a command's answer).

Env: SLACK_SIGNING_SECRET_ARN (Secrets Manager, read once per 5 minutes), SLACK_APPROVER_IDS,
IDEMPOTENCY_TABLE (replays), EVENT_BUS_NAME, LEDGER_TABLE. The request body, the signature and the
secrets are never logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.adapters import clients
from capacity.adapters.dynamodb import SignatureLog
from capacity.adapters.slack import signing_secret_from_secret
from capacity.logic.doors import slack_door
from capacity.ports import Ports
from capacity.settings import Settings

logger = Logger()


def _planner(body: Mapping[str, Any], ports: Ports, time_limit: float, requester: str) -> Mapping[str, Any]:
    """``/gpu plan``: the REST API's dry run with a short search budget, judged by the Slack user's team."""
    from capacity.logic.steps.plans import plan_reservation  # noqa: PLC0415 - only plan needs the search code

    result = plan_reservation(body, ports, requester=requester, time_limit_seconds=time_limit)
    answer: Mapping[str, Any] = result.model_dump(mode="json")
    return answer


@logger.inject_lambda_context(log_event=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Verify and answer one request from Slack."""
    settings = Settings.from_env(
        require=("slack_signing_secret_arn", "idempotency_table", "event_bus_name", "ledger_table")
    )
    ports = Ports(settings)
    secret_arn = settings.slack_signing_secret_arn
    door = slack_door.Door(
        signing_secret=lambda: signing_secret_from_secret(secret_arn),
        guard=SignatureLog(settings.idempotency_table, clients.dynamodb(settings.region)),
        approvers=settings.approvers,
        planner=_planner,
    )
    answer = slack_door.handle(event, ports, door)
    logger.info("slack answered", extra={"status": answer.status, "path": event.get("path")})
    return answer.proxy()
