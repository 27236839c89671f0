"""Interfaces shared by the local cloud's runtime (clock, dispatcher, delivery) and its AWS emulator.

Kept in one small module so that both sides are written against the same shapes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple, Protocol


class AwsError(Exception):
    """An AWS error response, as the service would send it.

    Attributes:
        code: the AWS error code (``ValidationException``, ``ResourceInUse``, ``ThrottlingException``...),
            which botocore surfaces as ``ClientError.response["Error"]["Code"]``.
        message: the human message, shaped like AWS's own.
        status: the HTTP status code (400 for client errors, 5xx for server errors).
        members: the error shape's other members, for JSON protocols (DynamoDB's
            ``TransactionCanceledException`` carries ``CancellationReasons``); botocore puts the modelled
            ones in ``ClientError.response``.
    """

    def __init__(
        self, code: str, message: str, status: int = 400, *, members: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.members = dict(members or {})


class EventSink(Protocol):
    """Where AWS-originated events go (EventBridge's default bus of the region)."""

    def put_aws_event(
        self,
        *,
        source: str,
        detail_type: str,
        detail: dict[str, Any],
        resources: list[str],
        region: str,
    ) -> None:
        """Put one event as AWS itself would (``source`` like ``aws.ec2``), timestamped now (virtual)."""
        ...


class Due(NamedTuple):
    """When a ticker next has work, and whether that work keeps a run going.

    ``foreground`` work (a one-time schedule, a capacity block start) keeps ``run_until_idle`` going;
    ``background`` work (a recurring cron schedule, alarm evaluation) does not on its own.
    """

    at: datetime
    foreground: bool


class Ticker(Protocol):
    """Something that changes by itself as virtual time passes (schedules, alarms, AWS lifecycles)."""

    def next_due(self, now: datetime) -> Due | None:
        """The earliest instant strictly after ``now`` at which ``advance`` has work, or None."""
        ...

    def advance(self, now: datetime) -> None:
        """Do all work due at or before ``now``; called by the clock each time it reaches a new instant."""
        ...


class BoundedTicker(Ticker, Protocol):
    """A ticker whose look-ahead is costly (alarm evaluation searches future period boundaries): the clock
    asks it last, with the earliest instant something else is already due, and it may stop looking there."""

    def next_due_before(self, now: datetime, horizon: datetime) -> Due | None:
        """As :meth:`next_due`, except that None may also mean "nothing at or before ``horizon``".

        Foreground work is never hidden this way: it is reported whatever ``horizon`` is (the clock stops
        a run that has none)."""
        ...
