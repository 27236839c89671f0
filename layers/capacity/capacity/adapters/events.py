"""EventBridge ``PutEvents`` on the application's bus (EventBridge API reference, "PutEvents").

Every event has ``Source`` :data:`capacity.EVENT_SOURCE` and a ``Detail`` that is a versioned pydantic
model from :mod:`capacity.models` (DESIGN.md section 5). ``PutEvents`` can fail per entry with HTTP 200
(``FailedEntryCount`` > 0): that is raised as :class:`~capacity.errors.RetryableAwsError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel

from capacity import EVENT_SOURCE
from capacity.adapters import clients
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
