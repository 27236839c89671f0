"""``capacity_block_events``: a capacity block's expiration warning (40 minutes before its end) becomes
``ReleaseRequested`` for the request that owns the block.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from capacity import TAG_REQUEST_ID
from capacity.events import ReleaseRequestedDetail
from capacity.logic.governance.checks import live_claimants
from capacity.ports import Ports
from capacity.record_kinds import RELEASED_MARKER
from capacity.timeutil import parse_utc

logger = logging.getLogger(__name__)

EXPIRY_REASON = "capacity-block-expiring"


def expiry_warning(event: Mapping[str, Any], ports: Ports) -> dict[str, Any]:
    """Turn a capacity block expiration warning (``aws.ec2``, detail ``capacity-reservation-id``, either
    documented detail-type spelling) into ``ReleaseRequested`` for the request that owns the block.

    Returns:
        ``{"request_id": <id> | None, "released": bool}``: None/False when the block is not the
        orchestrator's (no request-id tag, and no live request adopted it as brought) or already released.
    """
    detail = event.get("detail") or {}
    reservation_id = str(detail.get("capacity-reservation-id") or "")
    region = str(event.get("region") or ports.settings.region)
    if not reservation_id:
        logger.warning("capacity block event without capacity-reservation-id: %s", event)
        return {"request_id": None, "released": False}
    reservation = ports.ec2(region).describe_capacity_reservation(reservation_id)
    request_id = reservation.tags.get(TAG_REQUEST_ID) if reservation else None
    if not request_id:  # a brought block carries no tag of ours: the request that adopted it, if any
        request_id = next(iter(live_claimants(ports, reservation_id)), None)
    if not request_id:
        return {"request_id": None, "released": False}
    if ports.ledger.get(request_id, RELEASED_MARKER) is not None:
        return {"request_id": request_id, "released": False}
    warned_end = _parse_end(detail.get("end-date"))
    if reservation and reservation.end_time and warned_end and reservation.end_time > warned_end:
        # Delivered late or reordered, about an end the block has since been extended past (issue 17): act
        # on the block as it is now; its new end will warn again.
        logger.info(
            "expiry warning for %s ends %s; the block now ends %s",
            reservation_id,
            warned_end,
            reservation.end_time,
        )
        return {"request_id": request_id, "released": False}
    ports.events.put(
        "ReleaseRequested",
        ReleaseRequestedDetail(request_id=request_id, reason=EXPIRY_REASON),
        resources=[reservation.arn] if reservation and reservation.arn else [],
    )
    return {"request_id": request_id, "released": True}


def _parse_end(value: object) -> datetime | None:
    """A capacity block event's ``end-date`` (``2026-12-10T11:30:00Z``); None when absent or unreadable."""
    try:
        return parse_utc(str(value)) if value else None
    except ValueError:
        return None
