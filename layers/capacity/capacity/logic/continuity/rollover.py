"""Keep serving until ``serve_until`` (issue 17): at the lead time before a reservation ends, extend it in
place, else buy the next reservation and move the clients onto it, else tell a person then.

Over 400 lines: one ``serve_until`` walk (extend, buy the successor, hand over, tell a person) read in order;
issue 32 moves such walks into specs.

Lambda ``roll_over`` calls :func:`on_event` for every event that may change what is due: the one-time
schedule ``co-<id>-rollover`` (``RolloverDue``), ``ServeUntilChanged`` (``PATCH``), ``ReservationPurchased``,
``ReservationReady`` (capacity run on demand puts no ``ReservationPurchased``),
``ReservationExtended``, ``ExtensionFailed`` and ``ReservationFailed``. Each one is only news: delivery is at
least once and may reorder, so :func:`keep_serving` reads the ledger and does what the current state calls
for, recording every decision with a conditional put keyed by the end it was made for:

1. No ``serve_until``, stopped, nothing bought yet, or the end already covers it: nothing.
2. Before the lead time: the schedule is put (created or moved) at ``end - rollover_lead_hours``.
3. At the lead time, once per end, ``ROLLOVER_EXTENSION#<end>``: an extension in place reaching
   ``serve_until`` (else one day), the first offering the money rules allow
   (:func:`~capacity.logic.continuity.extend.require_extension_allowed`: the chain's budget, the team's month,
   approval above the threshold). It is requested on the requester's behalf (``ExtensionRequested``, bought
   once by the ExtendCapacity workflow) or, above the threshold, asked of an approver as any extension; no
   decision within :func:`~capacity.succession.approval_deadline` declines it (a conditional decision: a
   person's earlier one stands). A paid extension moves the end (and this schedule with it).
4. No extension (none offered, refused, above the budget, declined, payment failed): ``SUCCESSOR`` is put
   once, naming the successor request (:func:`~capacity.succession.successor_request`: the window that is
   ``InService`` before this reservation's release, the budget left on the chain), once a dry run
   (:func:`~capacity.logic.steps.plans.plan_reservation`) shows something it would buy; the successor is
   bought by the reserve workflow like any request (``ReservationRequested``; its id is deterministic, so a
   trigger delivered twice requests one successor and ``buy_once`` buys once). The schedule then checks on it
   at its latest start and at the switch deadline. The successor's ``READY`` switches the clients and releases
   this one (:func:`capacity.logic.continuity.chain.hand_over`); until then this one serves, released by its
   own schedule.
5. Nothing can be had (no offering, above the budget, too late, the successor failed): a person is told once
   per end (``ROLLOVER_TOLD#<end>``): ``RolloverFailed`` (the operations topic's notice) and the Slack thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from capacity import messages
from capacity.base import Model
from capacity.errors import (
    BudgetExceeded,
    ExtensionApprovalRequired,
    ExtensionRefused,
    TeamLimitExceeded,
)
from capacity.events import (
    ReservationRequestedDetail,
    RolloverDueDetail,
    RolloverFailedDetail,
    SlackOrigin,
)
from capacity.logic.continuity import extend, extension_ask
from capacity.logic.continuity.chain import chain_root, retire_endpoint, serving_target
from capacity.logic.steps import plans
from capacity.logic.steps.common import STOP_STATES, final_state, load_purchase, post, states
from capacity.naming import rollover_schedule_name
from capacity.offerings import ExtensionOffering
from capacity.planner import Decision
from capacity.ports import Ports
from capacity.record_kinds import (
    EXTENSION,
    EXTENSION_DECISION,
    EXTENSION_INTENT,
    EXTENSION_OFFER,
    EXTENSION_OUTCOME,
    PURCHASE,
    REQUEST,
    ROLLED_OVER,
    ROLLOVER_EXTENSION,
    ROLLOVER_TOLD,
    SLACK_ROOT,
    SLACK_THREAD,
    SUBMITTED,
    SUCCESSOR,
)
from capacity.records import State
from capacity.request import ReservationRequest
from capacity.succession import (
    DEPLOY_ALLOWANCE,
    MAX_GENERATIONS,
    NoSuccessorError,
    approval_deadline,
    covered,
    extension_hours,
    rollover_due,
    successor_id,
    successor_request,
    successor_window,
)
from capacity.timeutil import iso_z, parse_utc, short

logger = logging.getLogger(__name__)

REQUESTER = "capacity-orchestrator:serve-until"
"""Who asks for an automatic extension, on the requester's behalf (never an identity that may approve)."""
DUE_EVENT = "RolloverDue"
RETRY_AFTER = timedelta(minutes=30)
"""When a trigger whose handler died is tried again (:func:`_backstop`)."""


class KeepServingOutput(Model):
    """What :func:`keep_serving` did for ``request_id``: ``action`` (``none``, ``armed``, ``extending``,
    ``waiting-for-approval``, ``successor-requested``, ``successor-pending``, ``rolled-over``, ``told``) and
    why (``detail``); ``next_check`` when the schedule was put (UTC)."""

    request_id: str
    action: str
    detail: str = ""
    next_check: str | None = None


# ------------------------------------------------------------------------------------------ events


def on_event(detail_type: str, detail: Mapping[str, Any], ports: Ports) -> list[KeepServingOutput]:
    """Handle one event for the reservation it names (and for the predecessor of a successor it names: a
    successor that failed is news for the chain, and when nothing of the chain serves any more its endpoint
    parameter is retired). An ``ExtensionFailed`` of an automatic extension is recorded as its outcome first
    (an extension refused before it was bought records none).

    Raises:
        RetryableAwsError: the ledger, the bus, the scheduler or a search failed (Lambda retries the event).
    """
    request_id = str(detail.get("request_id") or "")
    if not request_id:
        return []
    if detail_type == "ExtensionFailed":
        _note_failed_extension(ports, request_id, str(detail.get("extension_id") or ""), detail)
    done = [keep_serving(request_id, ports, nudge=detail_type)]
    request = ports.ledger.get_request(request_id)
    if request is not None and request.rollover_of:
        done.append(keep_serving(request.rollover_of, ports, nudge=f"{detail_type} of {request_id}"))
        if detail_type == "ReservationFailed":  # failed before buying, it has no release to retire it
            retire_endpoint(ports, request_id)
    return done


def _note_failed_extension(
    ports: Ports, request_id: str, extension_id: str, detail: Mapping[str, Any]
) -> None:
    """An automatic extension that ended without a purchase (refused by the workflow before its intent) has
    no ``EXTENSION_OUTCOME``: record it from the event, so the roll-over goes on instead of asking again."""
    tried = [
        item
        for item in ports.ledger.items(request_id, f"{ROLLOVER_EXTENSION}#")
        if item.get("extension_id") == extension_id
    ]
    if not tried or ports.ledger.get(request_id, f"{EXTENSION}#{extension_id}") is not None:
        return
    ports.ledger.put_once(
        request_id,
        f"{EXTENSION_OUTCOME}#{extension_id}",
        {"outcome": "failed", "reason": str(detail.get("reason") or "refused"), "actor": ports.actor},
    )


# ------------------------------------------------------------------------------------------ the rule


@dataclass(frozen=True)
class _Due:
    """A reservation whose ``serve_until`` its end does not cover, as the ledger reads now (UTC)."""

    request: ReservationRequest
    serve_until: datetime
    lead_hours: int
    end: datetime
    margin: timedelta
    now: datetime

    @property
    def request_id(self) -> str:
        return self.request.id


def keep_serving(request_id: str, ports: Ports, *, nudge: str = DUE_EVENT) -> KeepServingOutput:  # noqa: PLR0911 - one return per case
    """Do what ``request_id``'s ``serve_until`` calls for now (module docstring). Idempotent.

    Raises:
        RetryableAwsError: the ledger, the bus, the scheduler or a search failed.
    """
    request = ports.ledger.get_request(request_id)
    if request is None:
        return KeepServingOutput(request_id=request_id, action="none", detail="no such reservation")
    target = serving_target(ports, request)
    if target.serve_until is None:
        return KeepServingOutput(request_id=request_id, action="none", detail="no serve_until")
    if states(ports.ledger.history(request_id)) & STOP_STATES:
        return KeepServingOutput(request_id=request_id, action="none", detail="stopped")
    purchase = load_purchase(ports, request_id)
    if purchase is None:
        return KeepServingOutput(request_id=request_id, action="none", detail="nothing bought yet")
    due = _Due(
        request,
        target.serve_until,
        target.lead_hours,
        purchase.end_time,
        extend.release_margin(request),
        ports.clock(),
    )
    if covered(due.end, due.margin, due.serve_until):
        return KeepServingOutput(request_id=request_id, action="none", detail=f"covered by {iso_z(due.end)}")
    if ports.ledger.get(request_id, ROLLED_OVER) is not None:
        return KeepServingOutput(request_id=request_id, action="rolled-over")
    logger.info("keep serving %s until %s (%s): ends %s", request_id, due.serve_until, nudge, due.end)
    if nudge == DUE_EVENT and ports.ledger.get(request_id, f"{ROLLOVER_TOLD}#{iso_z(due.end)}") is not None:
        # the backstop's last firing after a person was told: nothing more is due for this end
        return KeepServingOutput(request_id=request_id, action="told", detail="a person was told already")
    if ports.ledger.get(request_id, SUCCESSOR) is not None:
        _backstop(ports, due)
        return _follow(due, ports)
    at = rollover_due(due.end, due.lead_hours)
    if due.now < at:
        return _arm(ports, request_id, at, reason="lead-time", action="armed")
    _backstop(ports, due)
    return _act(due, ports, nudge=nudge)


def _backstop(ports: Ports, due: _Due) -> None:
    """Move the schedule :data:`RETRY_AFTER` on before the work: a handler that dies (Lambda's asynchronous
    retries exhausted, the event in the dead-letter queue) is tried again then, instead of the roll-over
    being lost with no notice. Every way out re-arms it (a later check) or ends (told: the next firing
    stops at once; a covered end or a hand-over: nothing to do)."""
    _arm(ports, due.request_id, due.now + RETRY_AFTER, reason="retry", action="armed")


def _arm(
    ports: Ports, request_id: str, at: datetime, *, reason: str, action: str, detail: str = ""
) -> KeepServingOutput:
    """Put (create or move) the reservation's one schedule at ``at``."""
    ports.scheduler.move_event(
        name=rollover_schedule_name(request_id),
        at=at,
        detail_type=DUE_EVENT,
        detail=RolloverDueDetail(request_id=request_id, reason=reason),
        description=f"Keep reservation {request_id} serving ({reason})",
    )
    return KeepServingOutput(request_id=request_id, action=action, detail=detail, next_check=iso_z(at))


def _act(due: _Due, ports: Ports, *, nudge: str) -> KeepServingOutput:
    """The lead time has come: an extension first, else a successor (module docstring)."""
    key = f"{ROLLOVER_EXTENSION}#{iso_z(due.end)}"
    tried = ports.ledger.get(due.request_id, key) or _try_extension(due, ports, key)
    verdict = _extension_verdict(due, tried, ports, nudge=nudge)
    if verdict == "pending":
        return KeepServingOutput(
            request_id=due.request_id, action="extending", detail=str(tried["extension_id"])
        )
    if verdict == "asking":
        deadline = parse_utc(str(tried["deadline"]))
        return _arm(
            ports, due.request_id, deadline, reason="approval-deadline", action="waiting-for-approval"
        )
    return _roll_over(due, ports, why=_why_not_extended(ports, due.request_id, tried))


# ------------------------------------------------------------------------------------------ extension first


def _choose_extension(due: _Due, ports: Ports) -> tuple[ExtensionOffering | None, bool, list[str]]:
    """The first extension offering (reaching ``serve_until``, else one day) the money rules allow, whether
    it needs an approver, and why the others were not taken."""
    needed = extension_hours(
        due.end,
        due.margin,
        due.serve_until,
        platform=due.request.platform,
        max_hours=extend.MAX_EXTENSION_HOURS,
    )
    reasons: list[str] = []
    for hours in dict.fromkeys([needed, 24]):
        try:
            offerings = extend.search_extensions(ports, due.request_id, hours)
        except ExtensionRefused as exc:
            reasons.append(str(exc))
            break  # the reservation cannot be extended at all (brought, on demand, AWS refuses)
        if not offerings:
            reasons.append(f"no extension of {hours} h is offered")
        for offering in offerings:
            try:
                extend.require_extension_allowed(
                    due.request, ports, offering, extension_id=offering.offering_id
                )
            except ExtensionApprovalRequired:
                return offering, True, reasons
            except (BudgetExceeded, TeamLimitExceeded, ExtensionRefused) as exc:
                reasons.append(str(exc))
                continue
            return offering, False, reasons
    return None, False, reasons


def _try_extension(due: _Due, ports: Ports, key: str) -> dict[str, Any]:
    """Record the extension chosen for this end once (``key``; a racing handler's choice wins) and tell."""
    chosen, approval, reasons = _choose_extension(due, ports)
    created, stored = ports.ledger.put_once(
        due.request_id,
        key,
        {
            "actor": ports.actor,
            "extension_id": chosen.offering_id if chosen else None,
            "offering": chosen.model_dump(mode="json") if chosen else None,
            "approval": approval,
            "deadline": iso_z(approval_deadline(due.now, due.lead_hours)),
            "reason": "; ".join(reasons) or None,
        },
    )
    if created and chosen is not None:
        ports.ledger.put_once(
            due.request_id,
            f"{EXTENSION_OFFER}#{chosen.offering_id}",
            {"offering": chosen.model_dump(mode="json")},
        )
        post(
            ports,
            messages.serving_extension(
                due.request_id,
                chosen.model_dump(mode="json"),
                serve_until=short(due.serve_until),
                approval=approval,
            ),
        )
    return stored


def _extension_verdict(due: _Due, tried: Mapping[str, Any], ports: Ports, *, nudge: str) -> str:
    """Where the automatic extension stands: ``none`` (none fits), ``pending`` (requested or being bought;
    requested again when no intent shows its event arrived), ``asking`` (an approver has until the deadline),
    ``failed`` (declined, rejected, payment failed) or ``paid``."""
    extension_id = tried.get("extension_id")
    if not extension_id:
        return "none"
    ledger, request_id = ports.ledger, due.request_id
    outcome = ledger.get(request_id, f"{EXTENSION_OUTCOME}#{extension_id}")
    if outcome is not None:
        return "paid" if outcome.get("outcome") == "paid" else "failed"
    offering = ExtensionOffering.model_validate(tried["offering"])
    if tried.get("approval"):
        decision = ledger.get(request_id, f"{EXTENSION_DECISION}#{extension_id}")
        if decision is None and due.now < parse_utc(str(tried["deadline"])):
            extension_ask.ask_approval(
                ports, request_id, offering, requester=REQUESTER, reason=_approval_reason(due.request)
            )
            return "asking"
        if decision is None:  # nobody decided in time: declined on the requester's behalf (a person's first)
            _, decision = ledger.put_once(
                request_id,
                f"{EXTENSION_DECISION}#{extension_id}",
                {
                    "approved": False,
                    "approver": REQUESTER,
                    "reason": f"no approver decided by {tried['deadline']}: the roll-over goes on",
                },
            )
        if not decision.get("approved"):
            ledger.put_once(
                request_id,
                f"{EXTENSION_OUTCOME}#{extension_id}",
                {
                    "outcome": "rejected",
                    "reason": str(decision.get("reason") or "rejected"),
                    "actor": ports.actor,
                },
            )
            return "failed"
    intent = ledger.get(request_id, f"{EXTENSION_INTENT}#{extension_id}")
    if intent is None and nudge != "ExtensionFailed":  # its event may have been lost: the workflow buys once
        extension_ask.put_request(ports, request_id, offering, requester=REQUESTER)
    return "pending"


def _approval_reason(request: ReservationRequest) -> str:
    threshold = request.approval_above_usd
    above = f" (above the approval threshold {threshold:f} USD)" if threshold is not None else ""
    return f"serve_until asks for this extension{above}; without a decision the next reservation is bought"


def _why_not_extended(ports: Ports, request_id: str, tried: Mapping[str, Any]) -> str:
    extension_id = tried.get("extension_id")
    if not extension_id:
        return str(tried.get("reason") or "no extension is offered")
    outcome = ports.ledger.get(request_id, f"{EXTENSION_OUTCOME}#{extension_id}") or {}
    return f"the extension {extension_id} was not bought ({outcome.get('reason') or outcome.get('outcome')})"


# ------------------------------------------------------------------------------------------ the successor


def _generation(ports: Ports, request: ReservationRequest) -> int:
    """The place of ``request`` in its chain (the root is 1)."""
    generation, current = 1, request
    while current.rollover_of and generation <= MAX_GENERATIONS:
        previous = ports.ledger.get_request(current.rollover_of)
        if previous is None:
            break
        generation, current = generation + 1, previous
    return generation


def _roll_over(due: _Due, ports: Ports, *, why: str) -> KeepServingOutput:
    """Request the successor once (module docstring, step 4), or tell why none can be had."""
    request = due.request
    generation = _generation(ports, request) + 1
    if generation > MAX_GENERATIONS:
        return _tell(due, ports, f"{why}; the chain already holds {MAX_GENERATIONS} reservations")
    spent = extend.extension_spend(ports, request.id)
    # The end was moved by an extension for this continuity: the successor starts where it ends, never
    # paying again for its hours (one continuity decision per lead time).
    extended = any(e.state is State.EXTENDED for e in ports.ledger.history(request.id))
    found = None
    try:
        for extra_days in (0, 1):  # the shortest successor that covers, else one day longer
            window = successor_window(
                end=due.end,
                margin=due.margin,
                serve_until=due.serve_until,
                now=due.now,
                platform=request.platform,
                extra_days=extra_days,
                after_paid_hours=extended,
            )
            body = successor_request(
                request,
                request_id=successor_id(chain_root(ports, request), generation),
                window=window,
                budget_left_usd=request.max_upfront_fee_usd - spent,
                serve_until=due.serve_until,
                lead_hours=due.lead_hours,
                now=due.now,
            )
            plan = plans.plan_reservation(body, ports)
            if plan.decision == Decision.DRY_RUN.value and plan.recommendation is not None:
                found = (window, body, plan)
                break
            if plan.decision != Decision.NO_OFFERING.value:
                break  # above the budget or refused: a longer one is not cheaper
    except NoSuccessorError as exc:
        return _tell(due, ports, f"{why}; no next reservation: {exc}")
    if found is None:
        return _tell(due, ports, f"{why}; no next reservation can be bought: {plan.reason}")
    window, body, plan = found
    if plan.recommendation is None:  # pragma: no cover - found only with a recommendation
        return _tell(due, ports, f"{why}; no next reservation was recommended")
    offering = plan.recommendation.summary()
    switch_by = window.latest_start + DEPLOY_ALLOWANCE  # in service by then (end - margin, or after the end)
    created, stored = ports.ledger.put_once(
        request.id,
        SUCCESSOR,
        {
            "actor": ports.actor,
            "successor_id": body["request_id"],
            "request": body,
            "latest_start": iso_z(window.latest_start),
            "switch_by": iso_z(switch_by),
            "offering": offering.model_dump(mode="json"),
            "needs_approval": plan.needs_approval,
            "why": why,
        },
    )
    _start_successor(ports, request.id, stored)
    successor = str(stored["successor_id"])
    if created:
        post(
            ports,
            messages.rolling_over(
                request.id,
                successor=successor,
                offering=offering,
                serve_until=short(due.serve_until),
                switch_by=short(switch_by),
                released_at=short(due.end - due.margin) if switch_by > due.end - due.margin else None,
            ),
        )
    check = max(parse_utc(str(stored["latest_start"])), due.now)
    return _arm(
        ports, request.id, check, reason="successor-check", action="successor-requested", detail=successor
    )


def _start_successor(ports: Ports, request_id: str, stored: Mapping[str, Any]) -> None:
    """Put the successor's ``ReservationRequested`` unless its request is recorded (a put lost, or this is a
    repeated trigger: the reserve workflow records one request per id). Its Slack messages go to the
    predecessor's thread."""
    ledger = ports.ledger
    successor = str(stored["successor_id"])
    if ledger.get(successor, REQUEST) is not None:
        return
    body: dict[str, Any] = dict(stored["request"])
    ledger.put_once(
        successor,
        SUBMITTED,
        {
            "actor": ports.actor,
            "requester": body.get("requester"),
            "team": body.get("team"),
            "rollover_of": request_id,
        },
    )
    root = ledger.get(request_id, SLACK_ROOT)
    if root is not None:
        ledger.put_once(successor, SLACK_ROOT, {"channel_id": root["channel_id"], "ts": root["ts"]})
    thread = ledger.get(request_id, SLACK_THREAD)
    origin = (
        SlackOrigin.model_validate(
            {k: thread[k] for k in ("channel_id", "user_id", "team_id") if thread.get(k)}
        )
        if thread is not None
        else None
    )
    ports.events.put("ReservationRequested", ReservationRequestedDetail(request=body, slack=origin))


def _follow(due: _Due, ports: Ports) -> KeepServingOutput:  # noqa: PLR0911 - one return per case
    """A successor was requested: make sure it runs, and tell a person when it cannot take over in time
    (it ended, nothing was bought by its latest start, or it is not in service by the switch deadline)."""
    stored = ports.ledger.get(due.request_id, SUCCESSOR) or {}
    successor = str(stored["successor_id"])
    latest_start = parse_utc(str(stored["latest_start"]))
    switch_by = parse_utc(str(stored["switch_by"]))
    recorded = ports.ledger.get_request(successor)
    if recorded is None:
        if due.now < latest_start:
            _start_successor(ports, due.request_id, stored)
            return _arm(
                ports,
                due.request_id,
                latest_start,
                reason="successor-check",
                action="successor-requested",
                detail=successor,
            )
        return _tell(due, ports, f"the next reservation {successor} was never recorded")
    if recorded.rollover_of != due.request_id:
        return _tell(due, ports, f"the request id {successor} is taken by another request")
    history = ports.ledger.history(successor)
    seen = states(history)
    if State.READY in seen:
        return KeepServingOutput(request_id=due.request_id, action="rolled-over", detail=successor)
    stop = final_state(history) or (State.RELEASING if State.RELEASING in seen else None)
    if stop is not None:
        why = next((str(e.detail["reason"]) for e in reversed(history) if e.detail.get("reason")), "")
        return _tell(due, ports, f"the next reservation {successor} ended {stop.value}: {why}")
    if due.now >= latest_start and ports.ledger.get(successor, PURCHASE) is None:
        return _tell(due, ports, f"the next reservation {successor} was not bought by {iso_z(latest_start)}")
    if due.now >= switch_by:
        return _tell(due, ports, f"the next reservation {successor} is not in service by {iso_z(switch_by)}")
    check = latest_start if due.now < latest_start else min(switch_by, latest_start + DEPLOY_ALLOWANCE)
    return _arm(
        ports,
        due.request_id,
        max(check, due.now),
        reason="successor-check",
        action="successor-pending",
        detail=successor,
    )


# ------------------------------------------------------------------------------------------ telling


def _tell(due: _Due, ports: Ports, reason: str) -> KeepServingOutput:
    """Tell a person, once per end, that the reservation stops serving at its end: ``RolloverFailed`` first
    (at least once: the operations topic's notice), then ``ROLLOVER_TOLD#<end>`` and the Slack thread."""
    key = f"{ROLLOVER_TOLD}#{iso_z(due.end)}"
    if ports.ledger.get(due.request_id, key) is None:
        ports.events.put(
            "RolloverFailed",
            RolloverFailedDetail(
                request_id=due.request_id, reason=reason, end_time=due.end, serve_until=due.serve_until
            ),
        )
        created, _ = ports.ledger.put_once(due.request_id, key, {"actor": ports.actor, "reason": reason})
        if created:
            post(
                ports,
                messages.serving_ends(
                    due.request_id, reason=reason, end=short(due.end), serve_until=short(due.serve_until)
                ),
            )
    return KeepServingOutput(request_id=due.request_id, action="told", detail=reason)
