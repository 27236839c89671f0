"""A workflow execution that ended outside the workflow's own paths: ``notify`` kind ``workflow_stopped``.

Step Functions puts a "Step Functions Execution Status Change" event on the default bus whenever an
execution of a Standard workflow changes status (AWS Step Functions developer guide, "Automating Step
Functions event delivery with EventBridge"); the stack's rule sends the final ``FAILED``, ``TIMED_OUT`` and
``ABORTED`` ones of its two workflows here. An operator's ``StopExecution``, an execution timeout, or an error
no ``Catch`` handles end an execution without a word in the ledger, so:

- **reserve**, stopped while its request has no outcome and it owns the request
  (:meth:`~capacity.ledger.Ledger.owner`): whatever a purchase intent bought is recorded first
  (:func:`~capacity.logic.steps.purchase.reconcile_purchase`). Money spent (or a purchase AWS may not show
  yet): the workflow is resumed, never thrown away: ``ReservationRequested`` again with ``resume_of`` (a new
  execution that waits out any Lambda the stopped one left running, takes the request over and goes on from
  what the ledger and AWS hold: nothing is bought twice). Nothing bought: the reservation ends ``FAILED``
  (``WorkflowStopped``) and the requester is told.
- **release**, ``ABORTED`` or ``TIMED_OUT`` before ``RELEASED``: the release is requested again (a ``FAILED``
  release was already recorded and its next attempt scheduled by its own ``AttemptFailed`` state).

Duplicate deliveries of the status event are harmless: the resume is claimed once (``RESUME#``), the failure
is an outcome written once, and a release requested twice releases once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from capacity import messages
from capacity.contracts.common import StepError
from capacity.contracts.notify import NotifyInput, NotifyOutput
from capacity.errors import FieldError, InvalidRequest, PurchaseUnconfirmed
from capacity.events import (
    ReleaseRequestedDetail,
    ReservationFailedDetail,
    ReservationRequestedDetail,
    ResumeOf,
)
from capacity.lifecycle import Event
from capacity.logic.steps.common import final_state, post
from capacity.logic.steps.purchase import reconcile_purchase
from capacity.ports import Ports
from capacity.record_kinds import SUBMITTED
from capacity.records import State
from capacity.request import parse_request
from capacity.timeutil import parse_utc
from capacity.validation import parse_model

logger = logging.getLogger(__name__)

STATUS_CHANGE = "Step Functions Execution Status Change"
"""The ``detail-type`` of Step Functions' execution events (source ``aws.states``)."""
STOPPED = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})

Failure = Callable[[NotifyInput, Ports], NotifyOutput]


def workflow_stopped(step: NotifyInput, ports: Ports, *, fail: Failure) -> NotifyOutput:
    """Handle one execution status change (``step.workflow``: the whole EventBridge event).

    Args:
        fail: records and tells a reserve failure (``notify``'s failure path), for a stop before anything
            was bought.

    Returns:
        ``notified`` False when there was nothing to do (another status, another workflow's input, a
        duplicate execution's stop, a request with an outcome already).

    Raises:
        InvalidRequest: ``workflow`` is not a Step Functions status change event.
        RetryableAwsError: AWS could not be asked what a purchase intent bought (the delivery is retried).
    """
    event = step.workflow or {}
    detail = event.get("detail")
    if event.get("detail-type") != STATUS_CHANGE or not isinstance(detail, Mapping):
        raise InvalidRequest([FieldError("workflow", f"is not a {STATUS_CHANGE!r} event")])
    status, execution = str(detail.get("status") or ""), str(detail.get("executionArn") or "")
    try:
        started = json.loads(str(detail.get("input") or "null"))
    except ValueError:
        started = None
    if status not in STOPPED or not execution or not isinstance(started, Mapping):
        return NotifyOutput(notified=False, state=None)
    kind = started.get("detail-type")
    if kind == "ReservationRequested":
        return _reserve_stopped(started, status, execution, ports, fail)
    if kind == "ReleaseRequested" and status != "FAILED":
        return _release_stopped(started, status, execution, ports)
    return NotifyOutput(notified=False, state=None)


def _request_id(started: Mapping[str, Any]) -> str | None:
    """The request a reserve execution was started for (as it was admitted when it was requested)."""
    try:
        detail = parse_model(ReservationRequestedDetail, started.get("detail"))
        if detail.resume_of is not None:
            return detail.resume_of.request_id
        return parse_request(detail.request, now=parse_utc(str(started.get("time")))).id
    except (InvalidRequest, ValueError):
        return None  # never admitted, so never recorded: nothing to carry on


def _reserve_stopped(
    started: Mapping[str, Any], status: str, execution: str, ports: Ports, fail: Failure
) -> NotifyOutput:
    request_id = _request_id(started)
    ledger = ports.ledger
    if request_id is None:
        return NotifyOutput(notified=False, state=None)
    if ledger.get_request(request_id) is None:
        return _never_recorded(request_id, status, execution, ports)
    final = final_state(ledger.history(request_id))
    if final is not None or ledger.owner(request_id) != execution:
        return NotifyOutput(notified=False, state=final.value if final else None)
    try:
        bought: object = reconcile_purchase(ports, request_id)
    except PurchaseUnconfirmed:
        bought = "unconfirmed"  # a purchase call AWS may not show yet: the resumed workflow looks again
    why = f"the reserve workflow {status.replace('_', ' ').lower()} ({execution.rsplit(':', 1)[-1]})"
    if bought is None:
        cause = f"{why} before anything was bought"
        error = StepError(Error="WorkflowStopped", Cause=cause)
        return fail(NotifyInput(kind="failure", request_id=request_id, error=error), ports)
    raw = parse_model(ReservationRequestedDetail, started.get("detail"))
    ports.events.put(
        "ReservationRequested",
        ReservationRequestedDetail(
            request=raw.request,
            slack=raw.slack,
            resume_of=ResumeOf(request_id=request_id, execution=execution),
        ),
    )
    logger.warning("%s: %s after money was at stake: resumed", request_id, why)
    post(ports, messages.resumed(request_id, why=why))
    return NotifyOutput(notified=True, state=State.REQUESTED.value)


def _never_recorded(request_id: str, status: str, execution: str, ports: Ports) -> NotifyOutput:
    """A reserve execution ended before recording a request its door accepted (``SUBMITTED``: a 202 was
    answered): the request ends ``FAILED`` with the reason and the requester is told, so GET never shows
    ``state: null`` once no workflow carries the request. Nothing was bought (no ``REQUEST``, so no step
    ran). An event nobody admitted (no ``SUBMITTED``) leaves nothing."""
    ledger = ports.ledger
    if ledger.get(request_id, SUBMITTED) is None:
        return NotifyOutput(notified=False, state=None)
    reason = (
        f"the reserve workflow {status.replace('_', ' ').lower()} ({execution.rsplit(':', 1)[-1]}) before it "
        "recorded the request: nothing was searched or bought; send the request again"
    )
    written = ledger.record(
        request_id, Event.FAIL, actor=ports.actor, detail={"error": "WorkflowStopped", "reason": reason}
    )
    if written is None:  # an outcome exists (a cancel before recording, a retried delivery of this event)
        final = final_state(ledger.history(request_id))
        return NotifyOutput(notified=False, state=final.value if final else None)
    ports.events.put(
        "ReservationFailed",
        ReservationFailedDetail(request_id=request_id, error="WorkflowStopped", reason=reason),
    )
    post(ports, messages.failure(request_id, error="WorkflowStopped", reason=reason, releasing=False))
    return NotifyOutput(notified=True, state=State.FAILED.value)


def _release_stopped(started: Mapping[str, Any], status: str, execution: str, ports: Ports) -> NotifyOutput:
    try:
        detail = parse_model(ReleaseRequestedDetail, started.get("detail"))
    except InvalidRequest:
        return NotifyOutput(notified=False, state=None)
    if final_state(ports.ledger.history(detail.request_id)) is State.RELEASED:
        return NotifyOutput(notified=False, state=State.RELEASED.value)
    logger.warning("release of %s %s (%s): requested again", detail.request_id, status, execution)
    ports.events.put(
        "ReleaseRequested", ReleaseRequestedDetail(request_id=detail.request_id, reason=detail.reason)
    )
    return NotifyOutput(notified=True, state=State.RELEASING.value)
