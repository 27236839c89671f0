"""EventBridge Scheduler: the one-time release schedule created right after a purchase.

``CreateSchedule`` (EventBridge Scheduler API reference) with ``ScheduleExpression``
``at(yyyy-mm-ddThh:mm:ss)`` in UTC, ``FlexibleTimeWindow`` OFF, ``ActionAfterCompletion`` DELETE and an
EventBridge target (``EventBridgeParameters`` ``DetailType``/``Source``; the target ``Input`` becomes the
event's ``detail``). The schedule name is derived from the request id, so a retried purchase step finds the
schedule (``ConflictException``) instead of creating a second one.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from capacity import EVENT_SOURCE
from capacity.adapters import clients
from capacity.adapters.clients import error_code
from capacity.errors import ConfigurationError
from capacity.models import ReleaseRequestedDetail
from capacity.timeutil import as_utc, utcnow

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

MIN_LEAD = timedelta(minutes=1)


class ReleaseScheduler:
    """Creates and deletes release schedules.

    Args:
        client: an EventBridge Scheduler client.
        group: env ``SCHEDULE_GROUP``.
        target_arn: env ``RELEASE_TARGET_ARN`` (the application's event bus ARN).
        role_arn: env ``SCHEDULER_ROLE_ARN`` (allowed to ``events:PutEvents`` on the bus).
    """

    def __init__(
        self, client: EventBridgeSchedulerClient, *, group: str, target_arn: str, role_arn: str
    ) -> None:
        self._client = client
        self._group = group
        self._target_arn = target_arn
        self._role_arn = role_arn

    def schedule_release(self, *, name: str, at: datetime, request_id: str, reason: str) -> bool:
        """Create the one-time schedule putting ``ReleaseRequested`` at ``at`` (UTC).

        A time in the past (or within a minute) is moved to one minute from now.

        Returns:
            True if created, False if a schedule with ``name`` already existed (a retry).

        Raises:
            ConfigurationError: ``RELEASE_TARGET_ARN`` or ``SCHEDULER_ROLE_ARN`` is not configured.
            RetryableAwsError: throttling/5xx after retries.
            ClientError: any other rejection.
        """
        if not self._target_arn or not self._role_arn:
            raise ConfigurationError("release schedules need RELEASE_TARGET_ARN and SCHEDULER_ROLE_ARN")
        when = max(as_utc(at), utcnow() + MIN_LEAD).replace(microsecond=0)
        detail = ReleaseRequestedDetail(request_id=request_id, reason=reason)
        try:
            self._client.create_schedule(
                Name=name,
                GroupName=self._group,
                ScheduleExpression=f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})",
                ScheduleExpressionTimezone="UTC",
                FlexibleTimeWindow={"Mode": "OFF"},
                ActionAfterCompletion="DELETE",
                Description=f"Release reservation {request_id} ({reason})",
                Target={
                    "Arn": self._target_arn,
                    "RoleArn": self._role_arn,
                    "Input": detail.model_dump_json(),
                    "EventBridgeParameters": {"DetailType": "ReleaseRequested", "Source": EVENT_SOURCE},
                },
            )
        except (ClientError, BotoCoreError) as exc:
            if isinstance(exc, ClientError) and error_code(exc) == "ConflictException":
                return False
            translated = clients.retryable(exc, "Scheduler CreateSchedule")
            if translated is not None:
                raise translated from exc
            raise
        return True

    def delete(self, name: str) -> bool:
        """Delete the schedule ``name``; False when it was already gone (fired and auto-deleted)."""
        try:
            self._client.delete_schedule(Name=name, GroupName=self._group)
        except (ClientError, BotoCoreError) as exc:
            if isinstance(exc, ClientError) and error_code(exc) == "ResourceNotFoundException":
                return False
            translated = clients.retryable(exc, "Scheduler DeleteSchedule")
            if translated is not None:
                raise translated from exc
            raise
        return True
