"""EventBridge: ``PutEvents`` on the application's bus (EventBridge API reference, "PutEvents"), and the
rule that forwards another region's AWS events to it (``PutRule``, ``PutTargets``, ``RemoveTargets``,
``DeleteRule``; "Sending and receiving events between AWS Regions", EventBridge user guide).

Every event has ``Source`` :data:`capacity.EVENT_SOURCE` and a ``Detail`` that is a versioned pydantic
model from :mod:`capacity.events` (DESIGN.md section 5). ``PutEvents`` can fail per entry with HTTP 200
(``FailedEntryCount`` > 0): that is raised as :class:`~capacity.errors.RetryableAwsError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel

from capacity import EVENT_SOURCE
from capacity.adapters import clients
from capacity.adapters.clients import error_code
from capacity.errors import RetryableAwsError

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient


class EventPublisher:
    """Puts the application's events on its bus.

    Args:
        bus_name: env ``EVENT_BUS_NAME`` (name or ARN).
        client: an EventBridge client.
    """

    def __init__(self, bus_name: str, client: EventBridgeClient) -> None:
        self._bus = bus_name
        self._client = client

    def put(self, detail_type: str, detail: BaseModel, *, resources: Sequence[str] = ()) -> str:
        """Put one event; returns its EventBridge event id.

        Args:
            detail_type: one of DESIGN.md section 5 (``ReservationPurchased``...).
            detail: the event's versioned detail model.
            resources: ARNs the event concerns (optional).

        Raises:
            RetryableAwsError: the call or the entry failed (throttling, internal error).
            ClientError: a non-transient rejection (e.g. the bus does not exist).
        """
        entry = {
            "Source": EVENT_SOURCE,
            "DetailType": detail_type,
            "Detail": detail.model_dump_json(),
            "EventBusName": self._bus,
            "Resources": list(resources),
        }
        try:
            answer = self._client.put_events(Entries=[entry])  # type: ignore[list-item]
        except (ClientError, BotoCoreError) as exc:
            translated = clients.translate(exc, f"EventBridge PutEvents {detail_type}")
            if translated is not None:
                raise translated from exc
            raise
        result = answer.get("Entries", [{}])[0]
        if answer.get("FailedEntryCount", 0) or result.get("ErrorCode"):
            raise RetryableAwsError(
                f"PutEvents {detail_type} failed: {result.get('ErrorCode')}: {result.get('ErrorMessage')}"
            )
        return str(result.get("EventId", ""))


FORWARD_TARGET_ID = "application-bus"
"""The ``Id`` of the forwarding rule's one target (the application's bus in the stack's region)."""


class EventRules:
    """Rules on the default bus of one region (the bus AWS services put their events on).

    Args:
        region: the region whose default bus holds the rules.
        client: an EventBridge client for that region (default: the cached one).
    """

    def __init__(self, region: str, client: EventBridgeClient | None = None) -> None:
        self.region = region
        self._client = client or clients.events(region)

    def _call[T](self, operation: str, function: Callable[[], T]) -> T:
        return clients.call(f"EventBridge {operation} ({self.region})", function)

    def put_forwarding_rule(
        self, *, name: str, pattern: Mapping[str, Any], description: str, target_arn: str, role_arn: str
    ) -> None:
        """``PutRule`` (an upsert by name) with ``pattern``, then ``PutTargets`` of the one event bus target
        ``target_arn`` (in another region: EventBridge assumes ``role_arn`` to put the events there).

        Raises:
            RetryableAwsError: throttling/5xx after retries, or a target EventBridge did not accept.
            ClientError: any other rejection.
        """
        self._call(
            "PutRule",
            lambda: self._client.put_rule(
                Name=name, EventPattern=json.dumps(pattern), State="ENABLED", Description=description[:512]
            ),
        )
        answer = self._call(
            "PutTargets",
            lambda: self._client.put_targets(
                Rule=name, Targets=[{"Id": FORWARD_TARGET_ID, "Arn": target_arn, "RoleArn": role_arn}]
            ),
        )
        if answer.get("FailedEntryCount", 0):
            failed = answer.get("FailedEntries", [{}])[0]
            raise RetryableAwsError(
                f"PutTargets {name} ({self.region}) failed: {failed.get('ErrorCode')}: "
                f"{failed.get('ErrorMessage')}"
            )

    def delete_rule(self, name: str) -> bool:
        """``RemoveTargets`` then ``DeleteRule``; False when there was no such rule.

        Raises:
            RetryableAwsError: throttling/5xx after retries.
            ClientError: any other rejection.
        """
        try:
            self._call(
                "RemoveTargets", lambda: self._client.remove_targets(Rule=name, Ids=[FORWARD_TARGET_ID])
            )
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return False
            raise
        self._call("DeleteRule", lambda: self._client.delete_rule(Name=name))
        return True
