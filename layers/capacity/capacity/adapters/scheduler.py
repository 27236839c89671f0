"""EventBridge Scheduler: the one-time release schedule created right after a purchase (and the one-time
idle checks of :mod:`capacity.logic.sagemaker.scaling`), and the recurring reservation schedules
(:class:`RequestSchedules`, ``POST /schedules``).

``CreateSchedule`` (EventBridge Scheduler API reference) with ``ScheduleExpression``
``at(yyyy-mm-ddThh:mm:ss)`` in UTC, ``FlexibleTimeWindow`` OFF, ``ActionAfterCompletion`` DELETE and an
EventBridge target (``EventBridgeParameters`` ``DetailType``/``Source``; the target ``Input`` becomes the
event's ``detail``). The schedule name is derived from the request id, so a retried purchase step finds the
schedule (``ConflictException``) instead of creating a second one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel

from capacity import EVENT_SOURCE
from capacity.adapters import clients
from capacity.adapters.clients import error_code
from capacity.errors import ConfigurationError, RetryableAwsError
from capacity.events import ReleaseRequestedDetail
from capacity.timeutil import as_utc, utcnow

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

MIN_LEAD = timedelta(minutes=1)
PAST_AT_ATTEMPTS = 3
"""How many times a release schedule refused for an ``at()`` gone by is asked again (from the new now)."""


def _release_event(request_id: str, reason: str) -> dict[str, Any]:
    """What a release schedule puts: ``ReleaseRequested`` for ``request_id`` with ``reason``."""
    return {
        "detail_type": "ReleaseRequested",
        "detail": ReleaseRequestedDetail(request_id=request_id, reason=reason),
        "description": f"Release reservation {request_id} ({reason})",
    }


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
        """Create the one-time schedule putting ``ReleaseRequested`` at ``at`` (UTC) (see
        :meth:`schedule_event`).

        Returns:
            True if created, False if a schedule with ``name`` already existed (a retry).

        Raises:
            ConfigurationError: ``RELEASE_TARGET_ARN`` or ``SCHEDULER_ROLE_ARN`` is not configured.
            RetryableAwsError: throttling/5xx after retries, or the time kept passing before the request.
            ClientError: any other rejection.
        """
        return self.schedule_event(name=name, at=at, **_release_event(request_id, reason))

    def schedule_event(
        self, *, name: str, at: datetime, detail_type: str, detail: BaseModel, description: str
    ) -> bool:
        """Create the one-time schedule putting the application event ``detail_type`` (source
        ``capacity.orchestrator``, ``detail`` as its JSON) on the bus at ``at`` (UTC).

        A time in the past (or within a minute) is moved to one minute from now. Scheduler refuses an
        ``at()`` that is no longer in the future when the request reaches it (``ValidationException``; a
        slow call can get there after the minute): the schedule is then asked again for a minute from
        then, up to :data:`PAST_AT_ATTEMPTS` times, so the release of money already spent is never lost.

        Returns:
            True if created, False if a schedule with ``name`` already existed (a retry).

        Raises:
            ConfigurationError: ``RELEASE_TARGET_ARN`` or ``SCHEDULER_ROLE_ARN`` is not configured.
            RetryableAwsError: throttling/5xx after retries, or the time kept passing before the request.
            ClientError: any other rejection.
        """
        if not self._target_arn or not self._role_arn:
            raise ConfigurationError("one-time schedules need RELEASE_TARGET_ARN and SCHEDULER_ROLE_ARN")
        for _ in range(PAST_AT_ATTEMPTS):
            when = max(as_utc(at), utcnow() + MIN_LEAD).replace(microsecond=0)
            try:
                self._client.create_schedule(**self._definition(name, when, detail_type, detail, description))
            except (ClientError, BotoCoreError) as exc:
                if isinstance(exc, ClientError) and error_code(exc) == "ConflictException":
                    return False
                if (
                    isinstance(exc, ClientError)
                    and error_code(exc) == "ValidationException"
                    and when <= utcnow()
                ):
                    continue  # the at() went by while the request travelled: ask again from now
                translated = clients.translate(exc, "Scheduler CreateSchedule")
                if translated is not None:
                    raise translated from exc
                raise
            return True
        raise RetryableAwsError(
            f"Scheduler CreateSchedule {name}: the time passed before each of {PAST_AT_ATTEMPTS} requests "
            "arrived (at() in the past)"
        )

    def _definition(
        self, name: str, when: datetime, detail_type: str, detail: BaseModel, description: str
    ) -> dict[str, Any]:
        """A one-time schedule's ``CreateSchedule``/``UpdateSchedule`` parameters."""
        return {
            "Name": name,
            "GroupName": self._group,
            "ScheduleExpression": f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})",
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "State": "ENABLED",  # UpdateSchedule replaces every field: say it (moto leaves it unset)
            "Description": description[:512],
            "Target": {
                "Arn": self._target_arn,
                "RoleArn": self._role_arn,
                "Input": detail.model_dump_json(),
                "EventBridgeParameters": {"DetailType": detail_type, "Source": EVENT_SOURCE},
            },
        }

    def move_release(self, *, name: str, at: datetime, request_id: str, reason: str) -> None:
        """Move the release schedule ``name`` to ``at`` (:meth:`move_event`). Used once an extension is paid.

        Raises:
            ConfigurationError, RetryableAwsError, ClientError: as :meth:`schedule_release`.
        """
        self.move_event(name=name, at=at, **_release_event(request_id, reason))

    def move_event(
        self, *, name: str, at: datetime, detail_type: str, detail: BaseModel, description: str
    ) -> None:
        """Move the one-time schedule ``name`` to ``at`` (UTC), putting ``detail_type`` with ``detail``
        (``UpdateSchedule`` replaces the whole definition; a schedule that is gone, fired or never made, is
        created: :meth:`schedule_event`).

        Raises:
            ConfigurationError, RetryableAwsError, ClientError: as :meth:`schedule_event`.
        """
        if not self._target_arn or not self._role_arn:
            raise ConfigurationError("one-time schedules need RELEASE_TARGET_ARN and SCHEDULER_ROLE_ARN")
        when = max(as_utc(at), utcnow() + MIN_LEAD).replace(microsecond=0)
        try:
            self._client.update_schedule(**self._definition(name, when, detail_type, detail, description))
        except (ClientError, BotoCoreError) as exc:
            if isinstance(exc, ClientError) and error_code(exc) == "ResourceNotFoundException":
                self.schedule_event(
                    name=name, at=at, detail_type=detail_type, detail=detail, description=description
                )
                return
            translated = clients.translate(exc, "Scheduler UpdateSchedule")
            if translated is not None:
                raise translated from exc
            raise

    def delete(self, name: str) -> bool:
        """Delete the schedule ``name``; False when it was already gone (fired and auto-deleted)."""
        try:
            self._client.delete_schedule(Name=name, GroupName=self._group)
        except (ClientError, BotoCoreError) as exc:
            if isinstance(exc, ClientError) and error_code(exc) == "ResourceNotFoundException":
                return False
            translated = clients.translate(exc, "Scheduler DeleteSchedule")
            if translated is not None:
                raise translated from exc
            raise
        return True


class RequestSchedules:
    """Recurring reservation schedules: one EventBridge Scheduler schedule per name in one group.

    Each schedule invokes the ``scheduled_request`` function (a templated Lambda target) with
    ``Input`` = the stored schedule definition plus ``<aws.scheduler.scheduled-time>``, which Scheduler
    replaces with the firing's time ("Adding context attributes", Scheduler user guide). The schedule is
    its own store: ``GetSchedule`` returns the definition back from ``Target.Input``.

    Args:
        client: an EventBridge Scheduler client.
        group: env ``REQUEST_SCHEDULE_GROUP``.
        target_arn: env ``SCHEDULED_REQUEST_FUNCTION_ARN``.
        role_arn: env ``REQUEST_SCHEDULER_ROLE_ARN`` (may invoke that function).
    """

    def __init__(
        self, client: EventBridgeSchedulerClient, *, group: str, target_arn: str, role_arn: str
    ) -> None:
        self._client = client
        self._group = group
        self._target_arn = target_arn
        self._role_arn = role_arn

    def _call[T](self, operation: str, function: Callable[[], T]) -> T:
        return clients.call(f"Scheduler {operation}", function)

    def create(
        self,
        *,
        name: str,
        expression: str,
        timezone: str,
        target_input: str,
        description: str,
        enabled: bool = True,
    ) -> bool:
        """``CreateSchedule`` (state ENABLED or DISABLED, flexible window OFF, kept after each run).

        Returns:
            True if created, False if a schedule ``name`` already exists in the group.

        Raises:
            ConfigurationError: the target or role ARN is not configured.
            RetryableAwsError: throttling/5xx after retries.
            ClientError: any other rejection (``ValidationException`` for a bad expression).
        """
        if not self._target_arn or not self._role_arn:
            raise ConfigurationError(
                "schedules need SCHEDULED_REQUEST_FUNCTION_ARN and REQUEST_SCHEDULER_ROLE_ARN"
            )
        try:
            self._call(
                "CreateSchedule",
                lambda: self._client.create_schedule(
                    Name=name,
                    GroupName=self._group,
                    ScheduleExpression=expression,
                    ScheduleExpressionTimezone=timezone,
                    FlexibleTimeWindow={"Mode": "OFF"},
                    State="ENABLED" if enabled else "DISABLED",
                    Description=description[:512],
                    Target={"Arn": self._target_arn, "RoleArn": self._role_arn, "Input": target_input},
                ),
            )
        except ClientError as exc:
            if error_code(exc) == "ConflictException":
                return False
            raise
        return True

    def get(self, name: str) -> dict[str, Any] | None:
        """``GetSchedule`` as botocore parses it (``Target.Input`` holds the definition), or None."""
        try:
            answer = self._call(
                "GetSchedule", lambda: self._client.get_schedule(Name=name, GroupName=self._group)
            )
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        return {key: value for key, value in answer.items() if key != "ResponseMetadata"}

    def names(self) -> list[str]:
        """Every schedule name in the group, sorted (``ListSchedules``, all pages)."""
        names: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"GroupName": self._group, "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = self._list_page(kwargs)
            names.extend(str(item["Name"]) for item in page.get("Schedules", []))
            token = page.get("NextToken")
            if not token:
                return sorted(names)

    def _list_page(self, kwargs: dict[str, Any]) -> Any:
        return self._call("ListSchedules", lambda: self._client.list_schedules(**kwargs))

    def delete(self, name: str) -> bool:
        """``DeleteSchedule``; False when there was none."""
        try:
            self._call(
                "DeleteSchedule", lambda: self._client.delete_schedule(Name=name, GroupName=self._group)
            )
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return False
            raise
        return True
