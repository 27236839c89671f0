"""Step 1, ``record_request``: validate the ``ReservationRequested`` event and record the request once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capacity.contracts.intake import RecordRequestOutput
from capacity.errors import FieldError, InvalidRequest, OutOfScope, ReservationCancelled
from capacity.events import ReservationRequestedDetail, ResumeOf
from capacity.jsonsafe import check_depth
from capacity.lifecycle import Event
from capacity.logic.continuity.attempts import live_intent
from capacity.logic.continuity.chain import serving_target
from capacity.logic.governance.checks import require_in_scope
from capacity.logic.steps.common import final_state, load_request, states
from capacity.offerings import OfferingSummary
from capacity.ports import Ports
from capacity.record_kinds import CANCEL_REQUESTED, RESUME_PREFIX, SLACK_THREAD, SUBMITTED, SUCCESSOR
from capacity.records import State
from capacity.request import ReservationRequest, parse_request
from capacity.timeutil import iso_z
from capacity.validation import parse_model


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
    check_depth(event["detail"], field="detail")  # anyone's event: its shape must not crash the reader
    detail = parse_model(ReservationRequestedDetail, event["detail"])
    if detail.resume_of is not None:
        return _resume(detail.resume_of, execution, ports)
    try:
        # The request's own rules first, then those of the clock: a request its door admitted (202) whose
        # delivery came too late for its window is recorded and failed with the reason (``invalid``), so
        # GET shows an outcome and the requester is told; one never valid is refused unrecorded.
        request, invalid = _admit(detail.request, ports)
    except InvalidRequest as exc:
        raise InvalidRequest([FieldError(f"request.{e.field}", e.message) for e in exc.errors]) from exc
    writer = execution or str(event.get("id") or "") or None
    ledger = ports.ledger
    invalid_error = "InvalidRequest"
    try:
        require_in_scope(request, ports)  # anyone's event: the same scopes as the API's
        require_named_successor(request, ports)
    except (OutOfScope, InvalidRequest) as exc:
        errors = [FieldError(f"request.{e.field}", e.message) for e in exc.errors]
        if ledger.get(request.id, SUBMITTED) is None:  # nobody was answered 202: refused unrecorded
            raise type(exc)(errors) from exc
        # A door accepted it (202) and the rules changed since (a team's scope, the chain it was to serve):
        # it is recorded and ends with the reason, never left without an outcome.
        if isinstance(exc, SuccessorNotNeeded):
            return _not_needed(request, exc, writer, ports)
        problems = "; ".join(f"{e.field}: {e.message}" for e in errors)
        invalid = f"it was refused when its workflow recorded it: {problems}"
        invalid_error = type(exc).__name__
    try:
        created = ledger.record_request(request, actor=ports.actor, write_id=writer)
    except ReservationCancelled:  # a DELETE got in between REQUEST and REQUESTED: it recorded CANCELLED
        return RecordRequestOutput(
            request_id=request.id,
            platform=request.platform,
            duplicate=True,
            regions=list(request.regions),
            dry_run=request.dry_run,
        )
    if created and detail.slack is not None:  # only the execution that recorded the request sets its thread
        ledger.put_once(request.id, SLACK_THREAD, detail.slack.model_dump(mode="json"), write_id=writer)
    # Checked after REQUEST is written: a DELETE either sees REQUEST (and records CANCELLED itself) or
    # put CANCEL_REQUESTED before this read, so a cancelled request never goes on to a purchase.
    cancel = ledger.get(request.id, CANCEL_REQUESTED)
    if cancel is not None:
        ledger.record(
            request.id,
            Event.CANCEL,
            actor=str(cancel.get("actor") or ports.actor),
            detail={"reason": "cancelled", "before": "record_request"},
        )
        created = False  # the workflow ends here (as for a duplicate): nothing is searched or bought
    return RecordRequestOutput(
        request_id=request.id,
        platform=request.platform,
        duplicate=not created,
        regions=list(request.regions),
        dry_run=request.dry_run,
        brought=request.brought is not None,
        invalid=invalid if created else None,
        invalid_error=invalid_error,
    )


def _admit(raw: Mapping[str, Any], ports: Ports) -> tuple[ReservationRequest, str | None]:
    """The request, and why it can no longer be served although valid in itself (None when it can): only
    the clock's rules (:mod:`capacity.admission`: a start more than 15 minutes past...) refuse it now.

    Raises:
        InvalidRequest: the request breaks a rule of its own, whatever the time (never recorded).
    """
    now = ports.clock()
    try:
        return parse_request(raw, now=now), None
    except InvalidRequest as exc:
        try:
            request = parse_request(raw, now=None)
        except InvalidRequest:
            raise exc from None
        problems = "; ".join(f"request.{e.field}: {e.message}" for e in exc.errors)
        return request, f"it reached the workflow at {iso_z(now)}, too late for its window ({problems})"


class SuccessorNotNeeded(InvalidRequest):
    """A successor whose predecessor no longer needs one (its ``serve_until`` was cleared or is covered by its
    own end): nobody asks for it any more."""


def _not_needed(
    request: ReservationRequest, exc: InvalidRequest, writer: str | None, ports: Ports
) -> RecordRequestOutput:
    """Record a successor nobody needs any more and end it ``CANCELLED`` (not a failure: the PATCH that
    cleared ``serve_until`` asked for exactly this); the workflow ends quietly, as for a duplicate."""
    ledger = ports.ledger
    try:
        created = ledger.record_request(request, actor=ports.actor, write_id=writer)
    except ReservationCancelled:  # cancelled meanwhile: that outcome stands
        created = False
    if created:
        ledger.record(
            request.id,
            Event.CANCEL,
            actor=ports.actor,
            detail={"reason": "not-needed", "why": "; ".join(e.message for e in exc.errors)},
        )
    return RecordRequestOutput(
        request_id=request.id,
        platform=request.platform,
        duplicate=True,
        regions=list(request.regions),
        dry_run=request.dry_run,
    )


def require_named_successor(request: ReservationRequest, ports: Ports) -> None:
    """A request with ``rollover_of`` takes over from that reservation only when it is the successor the
    orchestrator named there (its ``SUCCESSOR`` item, put before the successor was requested).

    Raises:
        InvalidRequest: ``rollover_of`` names a reservation whose successor is another request, or none, or
            one that was cancelled (a cancel stops the chain).
    """
    if request.rollover_of is None:
        return
    named = ports.ledger.get(request.rollover_of, SUCCESSOR)
    if State.CANCELLED in states(ports.ledger.history(request.rollover_of)):
        raise InvalidRequest(
            [
                FieldError(
                    "rollover_of", f"{request.rollover_of} was cancelled: nothing is kept serving for it"
                )
            ]
        )
    if named is None or named.get("successor_id") != request.id:
        raise InvalidRequest(
            [
                FieldError(
                    "rollover_of",
                    f"{request.rollover_of} did not name {request.id} as its successor: rollover_of is set "
                    "by the orchestrator when it rolls a reservation over (serve_until); remove it",
                )
            ]
        )
    # A PATCH that cleared serve_until (or moved it within the end) while the roll-over was under way found no
    # successor to stop: this one was named after it, so it is stopped here, before anything is bought.
    # Imported here: only a successor needs it, and it brings the extension logic into every cold
    # start of RecordRequestFunction otherwise.
    from capacity.logic.continuity.successor import successor_needed  # noqa: PLC0415

    predecessor = load_request(ports, request.rollover_of)
    if not successor_needed(ports, request.rollover_of, serving_target(ports, predecessor).serve_until):
        raise SuccessorNotNeeded(
            [
                FieldError(
                    "rollover_of",
                    f"{request.rollover_of} no longer needs a successor: its serve_until was cleared or is "
                    "covered by its own end (PATCH /reservations/{id})",
                )
            ]
        )


def _resume(resume: ResumeOf, execution: str | None, ports: Ports) -> RecordRequestOutput:
    """Carry on the stopped execution ``resume.execution`` of a recorded request: the request as recorded
    (not validated again: the clock has moved on since it was admitted), with this execution as the
    workflow's owner (the conditional ``RESUME#<stopped execution>`` item: one resumer wins). With
    ``resume.look``, the execution continues one that keeps looking (continue-as-new,
    :mod:`capacity.logic.continuity.keep_looking`) and carries on at that look, in the same way.

    Returns:
        ``duplicate`` True when the request has an outcome already, when the stopped execution no longer
        owns the request (a stale resume), or when another execution resumed it first;
        ``resume_offering`` the offering of the request's purchase intent, if any (back to the purchase);
        ``continued`` and ``look`` for a continuation.

    Raises:
        InvalidRequest: no request ``resume.request_id`` is recorded, or no execution is named.
    """
    ledger = ports.ledger
    request = ledger.get_request(resume.request_id)
    if request is None or not execution:
        raise InvalidRequest([FieldError("detail.resume_of.request_id", "names no recorded request")])
    ended = final_state(ledger.history(request.id)) is not None or ledger.owner(request.id) not in (
        resume.execution,
        execution,
    )
    created = False
    if not ended:
        created, _ = ledger.put_once(
            request.id,
            f"{RESUME_PREFIX}{resume.execution}",
            {"execution": execution, "actor": ports.actor},
            write_id=execution,
        )
    intent = live_intent(ports, request.id) if created else None  # not an attempt whose offering was taken
    named = intent.get("offering") if intent else None
    offering = OfferingSummary.model_validate(named) if named else None
    return RecordRequestOutput(
        request_id=request.id,
        platform=request.platform,
        duplicate=not created,
        regions=list(request.regions),
        dry_run=request.dry_run,
        resume_offering=offering,
        brought=request.brought is not None,
        continued=resume.look is not None,
        look=resume.look or 0,
    )
