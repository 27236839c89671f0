"""Step 4, ``notify``: approval requests, approval outcomes and failures.

Over 400 lines: the notify function handles six kinds that share the outcome bookkeeping.

- ``search_wait``: keeps the token of the wait between two looks of a request that keeps looking
  (:func:`capacity.logic.continuity.keep_looking.search_wait`), so a cancel ends the wait at once.
- ``offering_taken``: a look's offering was taken before the purchase and nothing replaced it: look again
  while before ``search_until`` (:func:`capacity.logic.continuity.keep_looking.offering_taken`).

- ``approval_request``: stores the task token (``APPROVAL`` item), records ``AWAITING_APPROVAL``, puts
  ``ApprovalRequested`` and posts the plan with Approve/Reject buttons. The state machine's
  ``.waitForTaskToken`` task then waits for ``POST /reservations/{id}/approval`` (or a Slack button).
  When the reservation already has a final state (cancelled meanwhile) it raises ``ReservationCancelled``
  and records and posts nothing; ``AWAITING_APPROVAL`` is written only while no ``OUTCOME`` exists (one
  transaction), so a DELETE landing between that check and the write cannot leave it after ``CANCELLED``.
- ``approval_outcome`` (``approved: false``, after a rejection or a timeout): records ``REJECTED``; a
  refused successor (``serve_until``) retires its chain's endpoint parameter when nothing of the chain
  serves any more (:func:`~capacity.logic.continuity.chain.retire_endpoint`: it has no release to do it).
- ``degraded``: a step that keeps failing on transient faults once money is at stake
  (:mod:`capacity.logic.steps.degraded`).
- ``failure``: first records whatever a purchase intent bought
  (:func:`~capacity.logic.steps.purchase.reconcile_purchase`: ``PURCHASE``, release schedule, ``PURCHASED``
  with the money), then records ``FAILED`` with a readable reason unless a final state already exists (or the
  step stopped with ``ReservationCancelled`` because a release started: a stop is not a failure), puts
  ``ReservationFailed`` and, if a purchase was attempted (and the failure is not the release's own),
  ``ReleaseRequested`` (reason ``failed``), posts (with the money already paid, if any).
- ``failure`` with ``phase`` ``release``: always reported, even after ``FAILED``/``CANCELLED``: appends a
  ``FAILED`` entry with ``detail.phase = "release"`` (once per release attempt: ``attempt_id``), puts
  ``ReservationFailed`` (its reason says the release failed) and posts that a person must act. Never
  puts ``ReleaseRequested`` (no loop). A release request rejected before it named a reservation
  (``InvalidRequest``) only posts: nothing was identified, nothing was deleted. The release workflow
  itself reports its failed attempts with what is left and the next try
  (:func:`report_release_failure`, from ``release_capacity``'s ``attempt_failed``); this task is its
  fallback when that step cannot run.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from capacity import messages
from capacity.contracts.common import StepError
from capacity.contracts.finding import ChooseOutput
from capacity.contracts.notify import DegradedOutput, NotifyInput, NotifyOutput
from capacity.errors import FieldError, InvalidRequest, ReservationCancelled
from capacity.events import ApprovalRequestedDetail, ReleaseRequestedDetail, ReservationFailedDetail
from capacity.lifecycle import Event
from capacity.logic.continuity.attempts import (
    attempt_calls,
    intent_key,
    live_attempt,
    live_hold_key,
    live_intent,
    nothing_bought,
)
from capacity.logic.continuity.chain import retire_endpoint
from capacity.logic.continuity.keep_looking import SEARCH_DEADLINE_PASSED, offering_taken, search_wait
from capacity.logic.governance.on_demand_spend import give_back_on_demand
from capacity.logic.governance.policy import as_admitted, give_back
from capacity.logic.steps import payment
from capacity.logic.steps.common import STOP_STATES, final_state, load_request, post, states
from capacity.logic.steps.degraded import degraded
from capacity.logic.steps.on_demand import adopt_left_behind
from capacity.logic.steps.purchase import reconcile_purchase
from capacity.logic.steps.stopped import workflow_stopped
from capacity.platforms import platform
from capacity.ports import Ports
from capacity.pricing import money_str
from capacity.record_kinds import APPROVAL, PURCHASE, PURCHASE_INTENT, PURCHASE_VOIDED, RELEASE_FAILURE_TOLD
from capacity.records import LedgerEntry, State
from capacity.timeutil import iso_ms, iso_z, parse_utc, short

_FRIENDLY_ERRORS = {
    "States.Timeout": "a step took longer than its timeout",
    "States.HeartbeatTimeout": "a step stopped reporting progress",
    "States.TaskFailed": "a step failed",
    "States.Runtime": "the workflow hit a runtime error",
    "Lambda.Unknown": "a Lambda function failed without a reason (out of memory or time?)",
    "ActivationTimeout": "the training plan did not become Active in time",
    "PlanFailed": "the training plan failed",
    "ModelNotFound": "a model of the request does not exist",
    "EndpointFailed": "the endpoint failed",
    "ComponentFailed": "an inference component failed",
    "OfferingExpired": "the offering expired before it could be bought",
    SEARCH_DEADLINE_PASSED: "nothing that fits was found by the request's search_until",
    "QuotaExceeded": "a service quota was exceeded",
    "PurchaseFailed": "the purchase failed",
    "BudgetExceeded": "the offering is over budget",
    "TeamLimitExceeded": "the team's limits refuse the purchase",
    "LeftoverResources": "the release left resources behind",
    "ReleaseStuck": "the release did not finish in time",
    "InvalidRequest": "the request is invalid",
    "RetryableAwsError": "AWS kept failing after retries",
    "ResourceBusy": "a resource stayed busy",
    "ConfigurationError": "the deployment is misconfigured",
}


def readable_reason(error: StepError) -> str:
    """A sentence from a Step Functions ``{"Error", "Cause"}`` (a Lambda cause is JSON: ``errorMessage``)."""
    cause = (error.Cause or "").strip()
    message = cause
    if cause.startswith("{"):
        try:
            data = json.loads(cause)
        except ValueError:
            data = None
        if isinstance(data, dict):
            message = str(data.get("errorMessage") or data.get("Cause") or cause)
    friendly = _FRIENDLY_ERRORS.get(error.Error)
    if friendly and message:
        return f"{friendly}: {message}"
    return friendly or message or f"{error.Error} (no cause given)"


def notify_step(step: NotifyInput, ports: Ports) -> NotifyOutput | DegradedOutput | ChooseOutput:
    """The ``notify`` Lambda's step: ``offering_taken`` answers a
    :class:`~capacity.contracts.finding.ChooseOutput` (the reserve workflow branches on it as on the choose
    step's); every other kind is :func:`notify`'s."""
    if step.kind == "offering_taken":
        return _offering_taken(step, ports)
    return notify(step, ports)


def notify(step: NotifyInput, ports: Ports) -> NotifyOutput | DegradedOutput:
    """Handle one notification.

    Raises:
        InvalidRequest: a field the kind needs is missing (``task_token``, ``plan``, ``error``).
        ReservationNotFound: ``approval_request`` for an unknown request.
    """
    if step.kind == "search_wait":
        return search_wait(step, ports)
    if step.kind == "approval_request":
        return _approval_request(step, ports)
    if step.kind == "approval_outcome":
        return _approval_outcome(step, ports)
    if step.kind == "degraded":
        return degraded(step, ports)
    if step.kind == "workflow_stopped":
        return workflow_stopped(step, ports, fail=_failure)
    return _failure(step, ports)


def _offering_taken(step: NotifyInput, ports: Ports) -> ChooseOutput:
    taken = step.error or StepError(Error="OfferingExpired", Cause=step.reason)
    return offering_taken(step, ports, reason=readable_reason(taken))


def _approval_request(step: NotifyInput, ports: Ports) -> NotifyOutput:
    if not step.task_token or step.plan is None:
        raise InvalidRequest(
            [
                FieldError(f, "is required for kind approval_request")
                for f in ("task_token", "plan")
                if not getattr(step, f)
            ]
        )
    request = load_request(ports, step.request_id)
    # The threshold that made the approval needed: the team's when lower than the request's (or none named).
    threshold = as_admitted(request, ports).approval_above_usd
    ledger = ports.ledger
    final = final_state(ledger.history(request.id))
    if final is not None:
        # Cancelled while the plan was being made (a DELETE between PLANNED and this step): nobody is asked
        # to approve, and AWAITING_APPROVAL never follows the final state (found by the fault soak).
        raise ReservationCancelled(f"reservation {request.id} is {final.value}: no approval is requested")
    attributes = {
        "task_token": step.task_token,
        "plan": step.plan.model_dump(mode="json"),
        "actor": ports.actor,
    }
    created, item = ledger.put_once(request.id, APPROVAL, attributes)
    if not created and item.get("task_token") != step.task_token:
        # A retried approval task has a new token: keep both, the newest wins (sorted after APPROVAL).
        ledger.put_once(request.id, f"{APPROVAL}#{iso_ms(ports.clock())}#{uuid.uuid4().hex[:8]}", attributes)
    seen = states(ledger.history(request.id))
    if State.AWAITING_APPROVAL not in seen:
        ports.events.put(
            "ApprovalRequested",
            ApprovalRequestedDetail(
                request_id=request.id,
                offering=step.plan.offering,
                approval_above_usd=threshold,
                timeout_seconds=step.plan.approval_timeout_seconds,
                approval_deadline=approval_deadline(
                    step.entered_at or ports.clock(), step.plan.approval_timeout_seconds
                ),
            ),
        )
    written = ledger.record(
        request.id,
        Event.ASK_APPROVAL,
        actor=ports.actor,
        detail={
            "reason": step.plan.reason,
            "timeout_seconds": step.plan.approval_timeout_seconds,
            "offering": step.plan.offering.model_dump(mode="json") if step.plan.offering else None,
            "approval_above_usd": money_str(threshold) if threshold is not None else None,
        },
    )
    if written is not None or created:
        timeout = step.plan.approval_timeout_seconds
        post(
            ports,
            messages.approval_request(
                request,
                step.plan.offering,
                step.plan.reason,
                timeout,
                threshold=threshold,
                deadline=approval_deadline(step.entered_at or ports.clock(), timeout),
            ),
        )
    return NotifyOutput(notified=True, state=State.AWAITING_APPROVAL.value)


def approval_deadline(entered: datetime, timeout_seconds: int) -> datetime:
    """The deadline to tell people (UTC, rounded down to the minute) for an approval wait of
    ``timeout_seconds`` whose state was entered at ``entered`` (``$$.State.EnteredTime``; each retried
    attempt's timeout starts later, never earlier), so nobody is told a later instant than AWS keeps."""
    return (entered + timedelta(seconds=timeout_seconds)).replace(second=0, microsecond=0)


_OUTCOMES = {
    "States.Timeout": "no approval arrived within the approval timeout",
    "ApprovalRejected": "a person rejected the purchase",
}


def outcome_reason(step: NotifyInput) -> str:
    """Why the purchase was not approved, for a person (the ASL passes the error name as ``reason``)."""
    reason = _OUTCOMES.get(step.reason or "", step.reason or "the approval was rejected or timed out")
    cause = step.error.Cause if step.error and step.error.Cause else None
    return f"{reason} ({cause})" if cause else reason


def _approval_outcome(step: NotifyInput, ports: Ports) -> NotifyOutput:
    ledger = ports.ledger
    if step.approved:
        return NotifyOutput(notified=True, state=_current(ports, step.request_id))
    reason = outcome_reason(step)
    written = ledger.record(
        step.request_id,
        Event.REJECT,
        actor=step.approver or ports.actor,
        detail={"error": "ApprovalRejected", "reason": reason},
    )
    if written is not None:
        post(ports, messages.approval_outcome(step.request_id, approved=False, reason=reason))
    request = ledger.get_request(step.request_id)
    if request is not None and request.rollover_of:  # a refused successor has no release to retire it
        retire_endpoint(ports, step.request_id)
    return NotifyOutput(notified=True, state=State.REJECTED.value)


def _failure(step: NotifyInput, ports: Ports) -> NotifyOutput:
    error = step.error or StepError(Error="States.TaskFailed", Cause=step.reason)
    reason = readable_reason(error)
    if step.phase == "release":
        return _release_failure(step, ports, error, reason)
    # On-demand capacity created and not recorded yet (the workflow stopped mid-try) is recorded first, so
    # the release deletes it; nothing launched on demand (no PURCHASE): the team gets the on-demand hold
    # back (a launch is settled by its release instead).
    left_behind = adopt_left_behind(ports, step.request_id, reason=reason)
    give_back_on_demand(ports, step.request_id)
    ledger = ports.ledger
    history = ledger.history(step.request_id)
    final = final_state(history)
    if final is not None:
        # Ended meanwhile (a cancel). A purchase attempt that bought nothing (what its intent led to is
        # recorded first) gives the team its hold back as a failure does: no release will, it finds nothing.
        if ledger.get(step.request_id, PURCHASE) is None and (
            live_intent(ports, step.request_id) is None
            or (
                reconcile_purchase(ports, step.request_id) is None
                and _not_bought(ports, step.request_id, error)
            )
        ):
            # Held, then stopped before buying.
            give_back(ports, live_hold_key(ports, step.request_id), money=True, quota=True)
            nothing_bought(ports, step.request_id)
        return NotifyOutput(notified=True, state=final.value)
    if error.Error == "ReservationCancelled" and states(history) & STOP_STATES:
        # Stopped by a release that started meanwhile (reservation end, idle): not a failure, and that
        # release owns what exists.
        return NotifyOutput(notified=True, state=history[-1].state.value)
    # Whatever an intent bought is recorded (with its release schedule) before the reservation is failed.
    bought = reconcile_purchase(ports, step.request_id)
    # A failed reserve workflow releases what it may have created; a failed release is not re-requested
    # (it would fail the same way): it is reported for a person to look at. On demand has no purchase
    # intent: its PURCHASE (instances, or an endpoint that missed its deadline) is what a release deletes.
    attempted = (
        left_behind
        or bought is not None
        or ledger.get(step.request_id, PURCHASE_INTENT) is not None
        or ledger.get(step.request_id, PURCHASE) is not None
    )
    if attempted:
        ports.events.put(
            "ReleaseRequested", ReleaseRequestedDetail(request_id=step.request_id, reason="failed")
        )
    voided = ledger.get(step.request_id, PURCHASE_VOIDED)
    if voided is not None or (bought is None and _not_bought(ports, step.request_id, error)):
        # The team's money and quota come back.
        give_back(ports, live_hold_key(ports, step.request_id), money=True, quota=True)
        if voided is None:
            nothing_bought(ports, step.request_id)
    refund = payment.refund(ledger.history(step.request_id), voided)  # once: RELEASED may have given it
    if error.Error == "TeamLimitExceeded" and bought is None:  # refused by the team's limits: a rejection
        written = ledger.record(
            step.request_id,
            Event.REJECT,
            actor=ports.actor,
            detail={"error": error.Error, "reason": reason},
        )
        _announce(ports, step.request_id, error.Error, reason)
        if written is not None:
            post(ports, messages.team_refusal(step.request_id, reason=reason))
        return NotifyOutput(notified=True, state=State.REJECTED.value)
    written = ledger.record(
        step.request_id,
        Event.FAIL,
        actor=ports.actor,
        detail={
            "error": error.Error,
            "reason": reason,
            "cause": (error.Cause or "")[:2000],
            **({"charged": False, "aws_status": voided["status"]} if voided is not None else {}),
        },
        money_usd=refund,  # AWS charged nothing for it: the money recorded at PURCHASED is reversed
    )
    _announce(ports, step.request_id, error.Error, reason)
    if written is not None:
        fee = Decimal(str(bought.get("upfront_fee_usd") or 0)) if bought is not None else Decimal(0)
        spent = fee if fee > 0 and voided is None else None  # on demand pays by the hour, nothing upfront
        post(
            ports,
            messages.failure(
                step.request_id, error=error.Error, reason=reason, releasing=attempted, spent=spent
            ),
        )
    return NotifyOutput(notified=True, state=State.FAILED.value)


_MAYBE_COMMITTED = frozenset(
    {"RetryableAwsError", "PurchaseUnconfirmed", "States.Timeout", "Sandbox.Timedout", "Lambda.Unknown"}
)
"""Failures after which a purchase call may have committed unseen (a timeout, a killed Lambda)."""


def _not_bought(ports: Ports, request_id: str, error: StepError) -> bool:
    """Nothing was bought and nothing can still show up: no purchase call was made, or the platform's call
    is unique (a training plan's name: reconcile's lookup is the answer), or AWS answered the call with a
    refusal. A call that may have committed unseen (EC2's eventually consistent reads) keeps its hold."""
    attempt = live_attempt(ports, request_id)
    if not attempt_calls(ports, request_id, attempt):
        return True
    intent = ports.ledger.get(request_id, intent_key(attempt)) or {}
    return platform(intent.get("platform")).purchase_name_unique or error.Error not in _MAYBE_COMMITTED


def _release_failure(step: NotifyInput, ports: Ports, error: StepError, reason: str) -> NotifyOutput:
    """A failed release is always reported: resources may still bill whatever the reservation's state."""
    if error.Error == "InvalidRequest":
        who = step.request_id or "(no request_id)"
        post(ports, messages.release_rejected(who, reason=reason))
        return NotifyOutput(
            notified=True, state=_current(ports, step.request_id) if step.request_id else None
        )
    report_release_failure(ports, step.request_id, error=error, attempt_id=step.attempt_id)
    return NotifyOutput(notified=True, state=State.FAILED.value)


def report_release_failure(
    ports: Ports,
    request_id: str,
    *,
    error: StepError,
    attempt_id: str | None,
    attempt: int | None = None,
    leftovers: Sequence[str] = (),
    retry_at: datetime | None = None,
) -> bool:
    """Record and tell one failed release attempt: ``FAILED`` (``detail.phase = "release"``, with the
    attempt, what is left and when the release is tried again, UTC), ``ReservationFailed`` and the Slack
    alert naming every leftover. Always, whatever the reservation's state: resources may still bill.

    Once per attempt: ``attempt_id`` is the release execution's name, so a retried task records nothing
    twice while every later attempt (a retry, the end-of-reservation release failing the same way) is
    recorded and told. Without an ``attempt_id``, once per ``RELEASING``.

    Returns:
        True when this call recorded it, False when the attempt was already reported.
    """
    history = ports.ledger.history(request_id)
    previous = [e for e in history if e.state is State.FAILED and e.detail.get("phase") == "release"]
    if attempt_id is not None:
        reported = [e for e in previous if e.detail.get("attempt_id") == attempt_id]
    else:
        releasing = [e for e in history if e.state is State.RELEASING]
        since = releasing[-1].at if releasing else None
        reported = [e for e in previous if since is None or e.at >= since]
    reason = readable_reason(error)
    if reported:  # a retried task: recorded already; told too, unless the Lambda died in between
        if ports.ledger.get(request_id, f"{RELEASE_FAILURE_TOLD}#{reported[0].sk}") is None:
            _tell_release_failure(
                ports, request_id, reported[0], error.Error, reported[0].detail.get("attempt")
            )
        return False
    left = f"; still there: {', '.join(leftovers)}" if leftovers else ""
    ports.events.put(
        "ReservationFailed",
        ReservationFailedDetail(
            request_id=request_id, error=error.Error, reason=f"release failed: {reason}{left}"[:4000]
        ),
    )
    entry = ports.ledger.record(
        request_id,
        Event.RELEASE_FAIL,
        actor=ports.actor,
        detail={
            "phase": "release",
            "error": error.Error,
            "reason": reason,
            "cause": (error.Cause or "")[:2000],
            "attempt_id": attempt_id,
            "attempt": attempt if attempt is not None else len(previous) + 1,
            "leftovers": list(leftovers),
            "retry_at": iso_z(retry_at) if retry_at else None,
        },
    )
    if entry is not None:
        _tell_release_failure(ports, request_id, entry, error.Error, attempt)
    return True


def _tell_release_failure(
    ports: Ports, request_id: str, entry: LedgerEntry, error: str, attempt: int | None
) -> None:
    """Post the alert of the release failure ``entry`` records, then mark it told."""
    retry_at = entry.detail.get("retry_at")
    post(
        ports,
        messages.release_failure(
            request_id,
            error=error,
            reason=str(entry.detail.get("reason") or error),
            leftovers=[str(left) for left in entry.detail.get("leftovers") or []],
            retry_at=f"{short(parse_utc(str(retry_at)))} UTC" if retry_at else None,
            attempt=attempt,
        ),
    )
    ports.ledger.put_once(request_id, f"{RELEASE_FAILURE_TOLD}#{entry.sk}", {"actor": ports.actor})


def _current(ports: Ports, request_id: str) -> str | None:
    state = ports.ledger.current_state(request_id)
    return state.value if state else None


def _announce(ports: Ports, request_id: str, error: str, reason: str) -> None:
    """``ReservationFailed``, once the outcome is recorded (a retry puts it again): its subscribers act on the
    reservation's current state (the roll-over tells a person when a successor ended), so the entry must be
    there when they read it."""
    ports.events.put(
        "ReservationFailed", ReservationFailedDetail(request_id=request_id, error=error, reason=reason)
    )
