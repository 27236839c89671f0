"""Step 1, ``record_request``: validate the ``ReservationRequested`` event and record the request once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capacity.contracts import RecordRequestOutput
from capacity.errors import FieldError, InvalidRequest
from capacity.ledger import CANCEL_REQUESTED, SLACK_THREAD
from capacity.models import ReservationRequestedDetail, State, parse_model, parse_request
from capacity.ports import Ports


def record_request(event: Mapping[str, Any], ports: Ports) -> RecordRequestOutput:
    """Validate the request in an EventBridge ``ReservationRequested`` event and record it.

    Args:
        event: the EventBridge event (``detail-type`` ReservationRequested, ``detail``
            ``{"schema_version": 1, "request": {...}}``, ``id`` the event id), as the workflow's input; or
            ``{"event": <that event>, "execution": <the Step Functions execution ARN>}`` (the state
            machine passes ``$$.Execution.Id``).
        ports: ledger.

    Returns:
        ``duplicate`` True when another execution (or delivery) already recorded this ``request_id``, or
        when the reservation was cancelled before it was recorded (the workflow ends quietly). The writer is
        the execution: a retry of this step in the same execution is not a duplicate, while a second
        execution started by the same event delivered twice (the same event ``id``: EventBridge delivers at
        least once) is one.

    Raises:
        InvalidRequest: the detail or the request is invalid (fields named ``request.<field>``).
    """
    execution: str | None = None
    if isinstance(event, Mapping) and isinstance(event.get("event"), Mapping):
        execution = str(event.get("execution") or "") or None
        event = event["event"]
    if not isinstance(event, Mapping) or not isinstance(event.get("detail"), Mapping):
        raise InvalidRequest([FieldError("detail", "the event has no detail object")])
    detail = parse_model(ReservationRequestedDetail, event["detail"])
    try:
        request = parse_request(detail.request, now=ports.clock())
    except InvalidRequest as exc:
        raise InvalidRequest([FieldError(f"request.{e.field}", e.message) for e in exc.errors]) from exc
    writer = execution or str(event.get("id") or "") or None
    ledger = ports.ledger
    created = ledger.record_request(request, actor=ports.actor, write_id=writer)
    if created and detail.slack is not None:  # only the execution that recorded the request sets its thread
        ledger.put_once(request.id, SLACK_THREAD, detail.slack.model_dump(mode="json"), write_id=writer)
    # Checked after REQUEST is written: a DELETE either sees REQUEST (and records CANCELLED itself) or
    # put CANCEL_REQUESTED before this read, so a cancelled request never goes on to a purchase.
    cancel = ledger.get(request.id, CANCEL_REQUESTED)
    if cancel is not None:
        ledger.append_outcome(
            request.id,
            State.CANCELLED,
            actor=str(cancel.get("actor") or ports.actor),
            detail={"reason": "cancelled", "before": "record_request"},
        )
        created = False  # the workflow ends here (as for a duplicate): nothing is searched or bought
    return RecordRequestOutput(
        request_id=request.id, duplicate=not created, regions=list(request.regions), dry_run=request.dry_run
    )
