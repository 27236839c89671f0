"""The doors' side of keeping serving (issue 17): ``PATCH /reservations/{id}`` with ``serve_until`` (and
``rollover_lead_hours``) sets or moves it after the request was made.
:mod:`capacity.logic.continuity.rollover` is the workflow's side.

Who may: the same rule as an extension (:func:`~capacity.logic.doors.api.require_may_act`, the requester's
side and the team's approvers): the money it may lead to is the request's own budget, already granted. The
change is recorded on the reservation and on every successor of its chain that still runs
(``SERVE_UNTIL#<time>``: the last one counts, nothing is overwritten), and each record is the trigger of
``ServeUntilChanged`` (:mod:`capacity.logic.steps.outbox`: tried at once, carried out from the ledger's stream
whatever happens to the try), so the schedule at the lead time is put or moved by the one function that owns
it. A successor not bought yet that the chain no longer needs (``serve_until`` cleared, or covered by the
reservation before it) is cancelled then.
"""

from __future__ import annotations

import contextlib
import itertools
from datetime import datetime, timedelta
from typing import Any

from pydantic import ConfigDict, Field

from capacity.base import Model
from capacity.errors import FieldError, InvalidRequest, PaidReservation, ReservationClosed, RetryableAwsError
from capacity.ledger import MAX_SEQ_ATTEMPTS
from capacity.logic.continuity.chain import chain_ids, chain_view, serving_target
from capacity.logic.continuity.successor import successor_needed
from capacity.logic.doors import api
from capacity.logic.steps import outbox
from capacity.logic.steps.common import STOP_STATES, load_purchase, load_request, states
from capacity.ports import Ports
from capacity.record_kinds import PURCHASE, PURCHASE_INTENT, SERVE_UNTIL
from capacity.request import MAX_ROLLOVER_LEAD_HOURS, MAX_SERVE_DAYS, MIN_ROLLOVER_LEAD_HOURS
from capacity.succession import rollover_due
from capacity.timeutil import iso_ms, iso_z
from capacity.validation import parse_model
from capacity.wire import StrictInt, UtcDatetime


class ServeUntilBody(Model):
    """Body of ``PATCH /reservations/{id}``: ``serve_until`` (UTC; null: keep serving no longer than the
    reservations bought so far) and/or ``rollover_lead_hours`` (how long before an end the orchestrator acts).
    At least one of them."""

    model_config = ConfigDict(extra="forbid")

    serve_until: UtcDatetime | None = Field(
        default=None, description="keep serving until this UTC time; null stops keeping it served"
    )
    rollover_lead_hours: StrictInt | None = Field(
        default=None, ge=MIN_ROLLOVER_LEAD_HOURS, le=MAX_ROLLOVER_LEAD_HOURS
    )


def set_serve_until(request_id: str, body: Any, ports: Ports, *, actor: str) -> dict[str, Any]:
    """Set or move ``serve_until`` (module docstring).

    Returns:
        ``{"request_id", "serve_until", "rollover_lead_hours", "next_check", "chain"}``: ``next_check`` is
        when the orchestrator acts (UTC; None while nothing is bought), ``chain`` as
        :func:`~capacity.logic.continuity.chain.chain_view`.

    Raises:
        InvalidRequest: the body is invalid: neither field given, ``serve_until`` not in the future or more
            than 365 days after the reservation's start (each names the field and the fix).
        ReservationNotFound: no such reservation.
        ReservationClosed: the reservation is released, cancelled, rejected or failed.
        RetryableAwsError: the ledger failed (send the same PATCH again).
    """
    sent = body if isinstance(body, dict) else {}
    parsed = parse_model(ServeUntilBody, sent)
    if "serve_until" not in sent and parsed.rollover_lead_hours is None:
        raise InvalidRequest(
            [FieldError("serve_until", "give serve_until (a UTC time, or null) and/or rollover_lead_hours")]
        )
    request = load_request(ports, request_id)
    current = serving_target(ports, request)
    until = parsed.serve_until if "serve_until" in sent else current.serve_until
    lead = parsed.rollover_lead_hours or current.lead_hours
    now = ports.clock()
    _check(until, request.earliest_start, now)
    stopped = states(ports.ledger.history(request_id)) & STOP_STATES
    if stopped:
        raise ReservationClosed(
            f"reservation {request_id} is {sorted(stopped)[0].value}: it can no longer be kept serving; "
            "request a new reservation"
        )
    chain = chain_ids(ports, request_id)
    for member in chain[chain.index(request_id) :]:  # this one and its successors
        if states(ports.ledger.history(member)) & STOP_STATES:
            continue
        change = _record(
            ports,
            member,
            {"serve_until": iso_z(until) if until else None, "rollover_lead_hours": lead},
            actor,
        )
        outbox.attempt(ports, change)
    # Read the chain again after recording: a roll-over that read serve_until before this change may have
    # named a successor since (its intake then sees this change: require_named_successor).
    chain = chain_ids(ports, request_id)
    _stop_unneeded(ports, chain[chain.index(request_id) :], until, actor)
    purchase = load_purchase(ports, request_id)
    return {
        "request_id": request_id,
        "serve_until": iso_z(until) if until else None,
        "rollover_lead_hours": lead,
        "next_check": iso_z(rollover_due(purchase.end_time, lead)) if purchase and until else None,
        "chain": chain_view(ports, request_id),
    }


def _stop_unneeded(ports: Ports, members: list[str], until: datetime | None, actor: str) -> None:
    """Cancel the successors not bought yet (no purchase intent) that the chain no longer needs: ``until``
    cleared, or covered by the reservation before them. Nothing is bought that was not asked for; a paid one
    is kept (its fee is spent; it takes over as planned).

    Raises:
        RetryableAwsError: the ledger or the bus failed (send the same PATCH again: idempotent).
    """
    for previous, successor in itertools.pairwise(members):
        ledger = ports.ledger
        if states(ledger.history(successor)) & STOP_STATES:
            continue
        if ledger.get(successor, PURCHASE_INTENT) is not None or ledger.get(successor, PURCHASE) is not None:
            return  # paid (or being bought): kept, and so are those after it
        if successor_needed(ports, previous, until):
            continue
        with contextlib.suppress(PaidReservation):  # bought meanwhile: kept
            api.cancel_reservation(successor, ports, actor=actor)
        return  # the cancel stops the ones after it too


def _record(ports: Ports, request_id: str, change: dict[str, Any], actor: str) -> dict[str, Any]:
    """Append ``SERVE_UNTIL#<time>#<seq>`` (effect :data:`~capacity.logic.steps.outbox.SERVE_UNTIL`): two
    changes in one millisecond keep their order (the last counts), never overwrite each other.

    Returns:
        The item as stored.

    Raises:
        RetryableAwsError: the ledger failed.
    """
    at = iso_ms(ports.clock())
    for seq in range(MAX_SEQ_ATTEMPTS):
        created, stored = ports.ledger.put_once(
            request_id,
            f"{SERVE_UNTIL}#{at}#{seq:04d}",
            change | {"actor": actor, outbox.EFFECT: outbox.SERVE_UNTIL},
        )
        if created:
            return stored
    raise RetryableAwsError(f"{MAX_SEQ_ATTEMPTS} serve_until changes of {request_id} at {at}: try again")


def _check(until: datetime | None, earliest_start: datetime, now: datetime) -> None:
    if until is None:
        return
    if until <= now:
        raise InvalidRequest(
            [
                FieldError(
                    "serve_until",
                    f"{iso_z(until)} is not in the future (now {iso_z(now)}): give a later time",
                )
            ]
        )
    horizon = earliest_start + timedelta(days=MAX_SERVE_DAYS)
    if until > horizon:
        raise InvalidRequest(
            [
                FieldError(
                    "serve_until",
                    f"{iso_z(until)} is more than {MAX_SERVE_DAYS} days after the reservation's start: use "
                    f"{iso_z(horizon)} or earlier",
                )
            ]
        )
