"""Keep looking until a deadline (issue 17 item 4, issue 31 item 4): whether a request searches again, its
``SEARCHING`` records, the wait between two looks, and when the workflow continues as a fresh execution.

A request with ``search_until`` whose search finds nothing that fits the rules - no offering
(``NO_OFFERING``) or none within its budget (``REJECTED`` without a team's refusal) - is not ended: the choose
step answers ``SEARCH_AGAIN`` with the next look's instant (:mod:`capacity.search_schedule`: every
``search_every_minutes`` at most, the last at the deadline) and the reserve workflow waits in ``SearchLater``,
a ``.waitForTaskToken`` task whose timeout is the next look, one a cancel can end at once (``DELETE`` fails
the newest stored token, as it does a waiting approval). A later look that finds something that fits goes
the usual way (``PLANNED``, an approval when one is needed, the purchase); when the purchase finds the
offering taken and nothing replaces it, :func:`offering_taken` looks again before the deadline (the intent
reconciled and closed, the hold given back: :mod:`capacity.logic.continuity.attempts`). At the deadline the
last look's plan stands: ``NO_OFFERING`` ends ``FAILED`` with the error ``SearchDeadlinePassed`` (the
requester is told in Slack, ``ReservationFailed`` is put and reaches the operations topic), over budget ends
``REJECTED``, each saying how long it looked. A team's refusal (types, regions, quota, its month's money) ends
at once: looking again does not change who may spend what. A dry run never waits: it says when it would look
next.

A look that finds nothing costs a few transitions and O(1) ledger work: ``SEARCHING`` is recorded at the
first look and when the answer changes (another decision or reason, or an offering taken), not at every
look, so the history every step reads stays short over weeks of 15-minute looks (30 days: 2,880 looks). The
look count travels in the workflow's state (``$.look``). Every
:func:`~capacity.search_schedule.looks_per_execution` looks the next look runs in a fresh execution of the
same state machine (:func:`successor_name`: continue-as-new before the 25,000-event history limit), which
takes the request over as a resumed execution does (``RESUME#<execution>``,
:mod:`capacity.logic.steps.intake`).

Ledger items: ``STATE#`` ``SEARCHING`` (``detail``: ``look``, ``since``, ``next_look_at`` (the look after
this one), ``search_until``, ``every_minutes``, ``looks_left``, ``decision``, ``reason``) and
``SEARCH_WAIT#<time>#<nonce>`` (each wait's token, read only by a cancel; the newest is the live one).
"""

from __future__ import annotations

import hashlib
import math
import re
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

from capacity import messages
from capacity.contracts.finding import ChooseOutput
from capacity.contracts.notify import NotifyInput, NotifyOutput
from capacity.errors import FieldError, InvalidRequest, ReservationCancelled
from capacity.lifecycle import Event
from capacity.logic.continuity.attempts import hold_key, intent_key, live_attempt, live_intent, nothing_bought
from capacity.logic.governance.policy import give_back
from capacity.logic.steps.common import final_state, load_request, post
from capacity.logic.steps.purchase import reconcile_purchase
from capacity.offerings import OfferingSummary
from capacity.planner import Decision, Plan
from capacity.ports import Ports
from capacity.purchases import parse_purchase
from capacity.record_kinds import APPROVAL_DECISION, PURCHASE_MISSED, SEARCH_WAIT
from capacity.records import LedgerEntry, State
from capacity.request import ReservationRequest
from capacity.search_schedule import looks_left, looks_per_execution, next_look
from capacity.timeutil import iso_ms, iso_z, parse_utc

SEARCH_DEADLINE_PASSED = "SearchDeadlinePassed"
"""The error a reservation ends ``FAILED`` with when nothing was found by ``search_until``."""
OFFERING_TAKEN = "OFFERING_TAKEN"
"""The ``SEARCHING`` decision of a look whose offering was taken before the purchase (nothing replaced it)."""


@dataclass(frozen=True)
class NextLook:
    """When a request that found nothing fitting looks again.

    ``since`` is its first look, ``at`` the next one, ``left`` how many are still to come with it,
    ``deadline`` the request's ``search_until`` (UTC).
    """

    since: datetime
    at: datetime
    left: int
    deadline: datetime


def may_look_again(plan: Plan, refusal: str | None) -> bool:
    """True when ``plan`` found nothing that fits the rules now but a later look may: no offering, or the
    cheapest one above the request's budget (prices and offerings move). A team's refusal is final."""
    return plan.decision is Decision.NO_OFFERING or (plan.decision is Decision.REJECTED and refusal is None)


def searching_entries(history: list[LedgerEntry]) -> list[LedgerEntry]:
    """The ``SEARCHING`` entries of a history, oldest first."""
    return [entry for entry in history if entry.state is State.SEARCHING]


def first_look(history: list[LedgerEntry], now: datetime) -> datetime:
    """When the request first looked (its first ``SEARCHING``'s ``since``), or ``now`` for the first look."""
    looked = searching_entries(history)
    return parse_utc(str(looked[0].detail["since"])) if looked else now


def next_look_for(request: ReservationRequest, since: datetime, now: datetime) -> NextLook | None:
    """The look after the one made at ``now`` by a request that first looked at ``since``, or None when it
    does not keep looking (no ``search_until``) or the deadline has come."""
    if request.search_until is None:
        return None
    every = request.search_every_minutes
    at = next_look(since, request.search_until, every, now=now)
    if at is None:
        return None
    left = looks_left(since, request.search_until, every, now=now)
    return NextLook(since=since, at=at, left=left, deadline=request.search_until)


def dry_run_note(request: ReservationRequest, now: datetime) -> tuple[datetime | None, str]:
    """For a dry run that found nothing fitting: when the workflow would look again, and the sentence that
    says so (``(None, "")`` without ``search_until``)."""
    upcoming = next_look_for(request, now, now)
    if upcoming is None:
        return None, ""
    return upcoming.at, (
        f" Nothing fits now: the request keeps looking until {iso_z(upcoming.deadline)} (search_until), so "
        f"it would look again at {iso_z(upcoming.at)} ({upcoming.left} looks at most, the last at the "
        "deadline) and buy as soon as something fits."
    )


def deadline_note(
    request: ReservationRequest, history: list[LedgerEntry], now: datetime, *, looks: int
) -> str:
    """The sentence in front of the final reason at the deadline: how long and how often (``looks``, this
    one included) it looked."""
    if request.search_until is None:
        return ""
    since = first_look(history, now)
    return (
        f"Looked {looks} time{'s' if looks > 1 else ''} from {iso_z(since)} until the deadline "
        f"{iso_z(request.search_until)} (search_until) and nothing fitted: "
    )


def record_searching(
    ports: Ports,
    request: ReservationRequest,
    decision: str,
    reason: str,
    history: list[LedgerEntry],
    *,
    look: int,
    upcoming: NextLook,
) -> None:
    """Record ``SEARCHING`` for look ``look`` when it says something new: the first look, another decision
    or reason than the last ``SEARCHING``, or :data:`OFFERING_TAKEN`; a look that finds what the last one
    found records nothing (and a retried step nothing twice). At the first one, and whenever an offering was
    taken, tell the requester that it keeps looking.

    Raises:
        ReservationCancelled: an outcome (a cancel) is recorded: nothing is written.
    """
    looked = searching_entries(history)
    last = looked[-1].detail if looked else None
    if last is not None and (
        str(last.get("look")) == str(look)  # the ledger gives numbers back as text
        or (decision != OFFERING_TAKEN and (last.get("decision"), last.get("reason")) == (decision, reason))
    ):
        return
    written = ports.ledger.record(
        request.id,
        Event.LOOK,
        actor=ports.actor,
        detail={
            "look": look,
            "since": iso_z(upcoming.since),
            "next_look_at": iso_z(upcoming.at),
            "search_until": iso_z(upcoming.deadline),
            "every_minutes": request.search_every_minutes,
            "looks_left": upcoming.left,
            "decision": decision,
            "reason": reason,
        },
    )
    if written is not None and (decision == OFFERING_TAKEN or not looked):
        post(ports, messages.searching(request, reason, upcoming.at, upcoming.left))


_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def successor_name(request: ReservationRequest, next_look: int) -> str | None:
    """The name of the fresh execution look ``next_look`` runs in, or None when it runs in this one.

    Every :func:`~capacity.search_schedule.looks_per_execution` looks (by the request's regions) the workflow
    continues as new; generation ``g`` holds looks ``g * n`` to ``(g + 1) * n - 1``. The name is derived
    from the request id and the generation, so a retried ``StartExecution`` (or a step answered twice) names
    the same execution and never starts two: ``<request id, A-Z a-z 0-9 _ - only>-<8 hex of its sha256>-g<g>``
    (at most 80 characters, Step Functions' limit; the hash keeps two ids that differ only in ``.`` or ``:``
    apart).
    """
    per = looks_per_execution(len(request.regions))
    if next_look <= 0 or next_look % per:
        return None
    digest = hashlib.sha256(request.id.encode()).hexdigest()[:8]
    return f"{_NAME_UNSAFE.sub('-', request.id)}-{digest}-g{next_look // per}"


@dataclass(frozen=True)
class Looking:
    """What keep looking makes of a search's plan: ``upcoming`` set means search again (``SEARCHING`` is
    recorded); otherwise ``plan`` stands, its reason completed (when a dry run would look again, or how
    long it looked by the deadline), ``error`` is what a ``NO_OFFERING`` ends with and ``next_look_at`` is a
    dry run's next look (UTC)."""

    plan: Plan
    error: str = "OfferingNotFound"
    upcoming: NextLook | None = None
    next_look_at: datetime | None = None


def look_again(
    ports: Ports,
    request: ReservationRequest,
    plan: Plan,
    refusal: str | None,
    history: list[LedgerEntry],
    *,
    look: int,
) -> Looking:
    """Whether the request searches again after ``plan`` (the choose step's rule, see the module docstring).

    Raises:
        ReservationCancelled: it would search again but an outcome (a cancel) is recorded.
    """
    if request.search_until is None or not may_look_again(plan, refusal):
        return Looking(plan)
    now = ports.clock()
    if request.dry_run:
        at, note = dry_run_note(request, now)
        return Looking(replace(plan, reason=plan.reason + note), next_look_at=at)
    upcoming = next_look_for(request, first_look(history, now), now)
    if upcoming is None:  # the deadline has come: the last look's plan stands
        note = deadline_note(request, history, now, looks=look + 1)
        return Looking(replace(plan, reason=note + plan.reason), error=SEARCH_DEADLINE_PASSED)
    record_searching(ports, request, plan.decision.value, plan.reason, history, look=look, upcoming=upcoming)
    return Looking(plan, upcoming=upcoming)


def search_wait(step: NotifyInput, ports: Ports) -> NotifyOutput:
    """``notify`` kind ``search_wait``: keep the waiting task's token (``SEARCH_WAIT#<time>#<nonce>``) so a
    cancel can end the wait at once; the task then waits until its timeout, the next look.

    The token is written before the outcome is read, and a ``DELETE`` records the outcome before it reads the
    newest token, so one of the two always sees the other: never a wait a cancel cannot end.

    Raises:
        InvalidRequest: no ``task_token``.
        ReservationCancelled: the reservation already has an outcome (nothing to wait for).
    """
    if not step.task_token:
        raise InvalidRequest([FieldError("task_token", "is required for kind search_wait")])
    now = ports.clock()
    ports.ledger.put_once(
        step.request_id,
        f"{SEARCH_WAIT}#{iso_ms(now)}#{uuid.uuid4().hex[:8]}",
        {"task_token": step.task_token, "actor": ports.actor},
    )
    final = final_state(ports.ledger.history(step.request_id))
    if final is not None:
        raise ReservationCancelled(f"reservation {step.request_id} is {final.value}: it looks no further")
    return NotifyOutput(notified=True, state=State.SEARCHING.value)


def latest_wait_token(ports: Ports, request_id: str) -> str | None:
    """The token of the newest search wait of ``request_id`` (None when it never waited)."""
    waits = sorted(ports.ledger.items(request_id, f"{SEARCH_WAIT}#"), key=lambda item: str(item["sk"]))
    return str(waits[-1]["task_token"]) if waits else None


def offering_taken(step: NotifyInput, ports: Ports, *, reason: str) -> ChooseOutput:
    """``notify`` kind ``offering_taken``: the purchase of look ``step.look``'s offering failed with
    ``OfferingExpired`` (another buyer took it and a fresh search of its region found no replacement within
    the rules; ``reason`` says so). A request that keeps looking looks again while before its deadline.

    The purchase intent is reconciled first: something bought after all (an earlier call that committed) is
    recorded and served (``PURCHASE``: the workflow goes back to the purchase step, which adopts it and
    never buys twice). Nothing bought: the attempt's hold goes back to the team, ``PURCHASE_MISSED#<n>``
    closes it (:mod:`capacity.logic.continuity.attempts`; once, only while the attempt's intent exists, so a
    retried step closes nothing twice), ``SEARCHING`` is recorded with the decision :data:`OFFERING_TAKEN` and
    the requester is told; the answer is ``SEARCH_AGAIN`` until the next look (as the choose step's).
    Otherwise (no ``search_until``, the deadline has come, an approver decided on the taken offering: one
    approval per request, or the reservation has ended) ``NO_OFFERING``: the workflow ends it as before,
    with the purchase's error.

    Raises:
        ReservationNotFound: the request is not recorded.
        ReservationCancelled: a cancel got in before ``SEARCHING`` (nothing is recorded; the hold is back).
        RetryableAwsError: AWS or DynamoDB failed (money may be behind the intent: retried).
    """
    request = load_request(ports, step.request_id)
    timeout = request.approval_timeout_hours * 3600
    # Every answer is about look ``step.look``; the next is ``step.look + 1``.
    answer = partial(ChooseOutput, approval_timeout_seconds=timeout, look=step.look, next_look=step.look + 1)
    bought = reconcile_purchase(ports, request.id)
    if bought is not None:
        offering = OfferingSummary.model_validate(_intent_offering(ports, request.id))
        why = f"an earlier purchase call bought {parse_purchase(bought).name}: it is served"
        return answer(decision=Decision.PURCHASE, reason=why, offering=offering)
    history = ports.ledger.history(request.id)
    now = ports.clock()
    upcoming = None if request.dry_run else next_look_for(request, first_look(history, now), now)
    # One approval per request (APPROVAL, APPROVAL_DECISION): a look needing another could not be asked.
    approved = ports.ledger.get(request.id, APPROVAL_DECISION) is not None
    if upcoming is None or approved or final_state(history) is not None:
        return answer(decision=Decision.NO_OFFERING, reason=reason, offering=None)
    _close_attempt(ports, request.id, reason)
    why = f"The offering look {step.look} chose was taken before it could be bought: {reason}"
    record_searching(ports, request, OFFERING_TAKEN, why, history, look=step.look, upcoming=upcoming)
    wait = max(1, math.ceil((upcoming.at - now).total_seconds()))
    return answer(
        decision=Decision.SEARCH_AGAIN,
        reason=why,
        offering=None,
        next_look_at=upcoming.at,
        wait_seconds=wait,
        continue_as=successor_name(request, step.look + 1),
    )


def _intent_offering(ports: Ports, request_id: str) -> object:
    """The offering the live attempt's intent names (what the purchase step is handed back to adopt)."""
    intent = live_intent(ports, request_id) or {}
    return intent.get("offering")


def _close_attempt(ports: Ports, request_id: str, reason: str) -> None:
    """Give the live attempt's hold back, then close it (``PURCHASE_MISSED#<n + 1>``) when it wrote an
    intent: the next look's purchase is a new attempt with its own intent and hold."""
    attempt = live_attempt(ports, request_id)
    intent = ports.ledger.get(request_id, intent_key(attempt))
    give_back(ports, hold_key(request_id, attempt), money=True, quota=True)
    nothing_bought(ports, request_id)
    if intent is None:  # closed by an earlier try of this step, or nothing was attempted
        return
    ports.ledger.put_once(
        request_id,
        f"{PURCHASE_MISSED}#{attempt + 1}",
        {"actor": ports.actor, "offering": intent.get("offering"), "reason": reason[:2000]},
        write_id=f"{request_id}#missed#{attempt + 1}",
    )
