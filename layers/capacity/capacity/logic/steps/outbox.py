"""The outbox: a recorded decision always takes effect (issue 28, point 5; DESIGN.md section 4).

A door records a decision in the ledger and answers. What the decision must cause (the release of a
cancelled reservation, the approval task's answer, an extension bought, the roll-over re-armed, the workflow
started) follows from the record itself: the ledger's stream (``NEW_IMAGE``) hands every decision item to the
``outbox`` function (an event source mapping with :data:`FILTERS` as its ``FilterCriteria``, bisect on error,
retries and an on-failure queue), which carries its effect out (:func:`carry_out`). A door still tries the
effect at once (:func:`attempt`: for speed, and so that an approval of a task that no longer waits answers
409), but nothing depends on that try: an effect lost to a throttle, a timeout or a killed Lambda is carried
out from the stream. Before, a cancel recorded ``CANCELLED`` while its ``ReleaseRequested`` failed on both of
the client's tries (an on-demand endpoint billed 71 hours more), and an approval recorded while its
``SendTaskSuccess`` was throttled on both tries ended ``REJECTED`` "no approval arrived".

The decisions (the item recorded, who records it: its effect):

- ``OUTCOME`` and ``STATE#`` ``CANCELLED`` with ``detail.reason`` ``cancelled``
  (``DELETE /reservations/{id}``, ``/gpu cancel``, a PATCH that no longer needs a successor): the waiting
  approval and search wait are failed (``ReservationCancelled``) and ``ReleaseRequested`` (``cancelled``) is
  put (:data:`CANCEL`);
- ``APPROVAL_DECISION`` (``POST .../approval``, Approve/Reject): ``SendTaskSuccess``/``SendTaskFailure`` with
  the newest task token, then ``APPROVAL_DELIVERED`` (:data:`HAND_BACK`);
- ``EXTENSION_DECISION#<id>`` (``POST .../extensions/{id}/approval``, the buttons): approved,
  ``ExtensionRequested``; rejected, ``EXTENSION_OUTCOME#<id>`` ``rejected`` and ``ExtensionFailed``
  (:data:`EXTENSION_DECISION`);
- ``EXTENSION_REQUEST#<id>`` (``POST .../extensions`` with an offering below the approval threshold, the
  Extend button): ``ExtensionRequested`` (:data:`EXTENSION_REQUEST`);
- ``SERVE_UNTIL#<time>#<seq>`` (``PATCH /reservations/{id}``): ``ServeUntilChanged`` (:data:`SERVE_UNTIL`);
- ``RELEASE_REQUEST#<time>#<nonce>`` (a repeated DELETE while something bought may bill):
  ``ReleaseRequested`` (:data:`RELEASE`);
- ``SUBMITTED`` (``POST /reservations``, a schedule's run): ``ReservationRequested`` unless the workflow
  recorded the request already (:data:`SUBMIT`).

Every item but the cancel's names its effect in its ``effect`` attribute; the cancel is the outcome itself
(the ``OUTCOME`` marker first, the ``CANCELLED`` state after it: either one triggers it, whatever the ledger's
write protocol becomes). Each effect is carried out once per decision: ``OUTBOX#<decision sk>`` (for the
cancel ``OUTBOX#CANCELLED``) is put after it, and a batch seen again (Lambda reads a stream at least once)
finds it and does nothing. Its targets tolerate a duplicate all the same (a door's try and the stream's
racing): a second ``ReleaseRequested`` starts a release that finds the first's work done, a second answer to
a task is refused (``TaskTimedOut``/``InvalidToken``: nothing to do), a second ``ExtensionRequested`` meets
the extension's intent (one purchase per extension id), a second ``ServeUntilChanged`` is news to a roll-over
that acts on the ledger, a second ``ReservationRequested`` ends ``Duplicate`` in ``record_request``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from capacity.base import Model
from capacity.errors import NotAwaitingApproval, RetryableAwsError
from capacity.events import (
    ExtensionFailedDetail,
    ExtensionRequestedDetail,
    ReleaseRequestedDetail,
    ReservationRequestedDetail,
    ServeUntilChangedDetail,
)
from capacity.ledger import image_item
from capacity.logic.continuity.extend import current_end
from capacity.logic.continuity.keep_looking import latest_wait_token
from capacity.logic.steps.common import load_purchase
from capacity.offerings import ExtensionOffering
from capacity.ports import Ports
from capacity.record_kinds import (
    APPROVAL,
    APPROVAL_DELIVERED,
    EXTENSION_APPROVAL,
    EXTENSION_INTENT,
    EXTENSION_OUTCOME,
    OUTBOX,
    OUTCOME,
    REQUEST,
    STATE_PREFIX,
)
from capacity.records import State
from capacity.timeutil import parse_utc

logger = logging.getLogger(__name__)

EFFECT = "effect"
"""The attribute naming a decision item's effect (every decision but the cancel's)."""
CANCEL = "cancel"
HAND_BACK = "hand-back"
EXTENSION_DECISION = "extension-decision"
EXTENSION_REQUEST = "extension-request"
SERVE_UNTIL = "serve-until"
RELEASE = "release"
SUBMIT = "submit"
CANCELLED_REASON = "cancelled"
"""The ``detail.reason`` of a person's cancel (``api.cancel_reservation``)."""

FILTERS: tuple[dict[str, Any], ...] = (
    {"eventName": ["INSERT"], "dynamodb": {"NewImage": {EFFECT: {"S": [{"exists": True}]}}}},
    {
        "eventName": ["INSERT"],
        "dynamodb": {
            "Keys": {"sk": {"S": [OUTCOME]}},
            "NewImage": {
                "outcome": {"S": [State.CANCELLED.value]},
                "detail": {"M": {"reason": {"S": [CANCELLED_REASON]}}},
            },
        },
    },
    {
        "eventName": ["INSERT"],
        "dynamodb": {
            "Keys": {"sk": {"S": [{"prefix": STATE_PREFIX}]}},
            "NewImage": {
                "state": {"S": [State.CANCELLED.value]},
                "detail": {"M": {"reason": {"S": [CANCELLED_REASON]}}},
            },
        },
    },
)
"""The ``FilterCriteria`` of the ledger stream's mapping (Lambda event filtering, EventBridge pattern syntax
on the record in DynamoDB JSON): the items that name an effect, and a person's cancel (its ``OUTCOME``
marker and its ``CANCELLED`` state). ``template.yaml``'s ``OutboxStreamMapping`` holds the same (a template
test pins it)."""


class Carried(Model):
    """What :func:`carry_out` did with one decision: ``effect``, ``outcome`` (what happened, or
    ``already`` when an earlier delivery did it)."""

    request_id: str
    decision: str
    effect: str
    outcome: str


class OutboxResult(Model):
    """The ``outbox`` function's answer: one :class:`Carried` per decision of the batch, in order."""

    carried: list[Carried]


def effect_of(item: Mapping[str, Any]) -> str | None:
    """The effect a ledger item calls for (one of :data:`CANCEL`, :data:`HAND_BACK`...), or None."""
    named = item.get(EFFECT)
    if isinstance(named, str) and named in _EFFECTS:
        return named
    sk = str(item.get("sk") or "")
    reason = (item.get("detail") or {}).get("reason") if isinstance(item.get("detail"), Mapping) else None
    if reason != CANCELLED_REASON:
        return None
    if (sk == OUTCOME and item.get("outcome") == State.CANCELLED.value) or (
        sk.startswith(STATE_PREFIX) and item.get("state") == State.CANCELLED.value
    ):
        return CANCEL
    return None


def done_key(item: Mapping[str, Any]) -> str:
    """The ``OUTBOX#`` item that says the decision ``item`` took effect (one per cancel, else per item)."""
    if effect_of(item) == CANCEL:
        return f"{OUTBOX}#{State.CANCELLED.value}"
    return f"{OUTBOX}#{item['sk']}"


def carry_out(images: Sequence[Mapping[str, Any]], ports: Ports) -> OutboxResult:
    """The ``outbox`` function: carry out the effect of each decision item of a stream batch, in order.

    Args:
        images: the records' ``NewImage`` in DynamoDB JSON (``{"attr": {"S": ...}}``), as the stream holds
            them.

    Returns:
        :class:`OutboxResult`; an item that is no decision (a filter let it through) is skipped.

    Raises:
        RetryableAwsError: an effect's AWS call failed beyond its retries: the batch fails and Lambda tries it
            again (the decisions before it are marked done and are not carried out twice).
        AccessDenied, ConfigurationError: a deployment defect; retried, then the on-failure queue's alarm.
    """
    carried: list[Carried] = []
    for image in images:
        item = image_item(image)
        effect = effect_of(item)
        if effect is None:
            continue
        request_id = str(item["request_id"])
        marker = done_key(item)
        if ports.ledger.get(request_id, marker) is not None:
            outcome = "already"
        else:
            outcome = _run(effect, ports, item)
            _mark(ports, item, effect, outcome)
        decision = str(item["sk"])
        carried.append(Carried(request_id=request_id, decision=decision, effect=effect, outcome=outcome))
    return OutboxResult(carried=carried)


def attempt(ports: Ports, item: Mapping[str, Any]) -> bool:
    """A door's own try of the effect of the decision it just recorded (``item`` as stored), for speed: done
    now, it is marked done and the stream's delivery finds nothing left to do. A transient failure is logged
    and left to the stream.

    Returns:
        True when the effect was carried out now.

    Raises:
        NotAwaitingApproval: (a hand-back) the approval task no longer waits: the door answers 409.
    """
    effect = effect_of(item)
    if effect is None:
        raise ValueError(f"ledger item {item.get('sk')!r} names no effect")
    try:
        outcome = _run(effect, ports, item, strict=True)
        _mark(ports, item, effect, outcome)
    except RetryableAwsError as exc:
        where = f"{item.get('request_id')}/{item['sk']}"
        logger.warning("the %s effect of %s is left to the outbox: %s", effect, where, exc)
        return False
    return True


def _run(effect: str, ports: Ports, item: Mapping[str, Any], *, strict: bool = False) -> str:
    if effect == HAND_BACK:
        try:
            return _hand_back(ports, item)
        except NotAwaitingApproval as gone:
            if strict:
                raise
            return f"not handed back: {gone}"
    return _EFFECTS[effect](ports, item)


def _mark(ports: Ports, item: Mapping[str, Any], effect: str, outcome: str) -> None:
    ports.ledger.put_once(
        str(item["request_id"]),
        done_key(item),
        {"carried_out": effect, "decision": str(item["sk"]), "outcome": outcome, "by": ports.actor},
    )


# ------------------------------------------------------------------------------------------------ effects


def approval_token(ports: Ports, request_id: str) -> str | None:
    """The task token of the newest approval task of ``request_id`` (``APPROVAL``, or a retried task's
    ``APPROVAL#<time>#<id>``), or None when none waited."""
    approvals = [
        item
        for item in ports.ledger.items(request_id, APPROVAL)
        if item["sk"] == APPROVAL or str(item["sk"]).startswith(f"{APPROVAL}#")
    ]
    approvals.sort(key=lambda item: str(item["sk"]))
    return str(approvals[-1]["task_token"]) if approvals else None


def _cancel(ports: Ports, item: Mapping[str, Any]) -> str:
    """A person's cancel: end the waiting approval and the wait between two looks (``ReservationCancelled``:
    the workflow stops at once, nothing is bought), and request the release (``cancelled``). A cancel recorded
    before the request was (``detail.before``) has nothing waiting and nothing bought."""
    request_id = str(item["request_id"])
    if (item.get("detail") or {}).get("before"):
        return "nothing to release: cancelled before the request was recorded"
    actor = str(item.get("actor") or "someone")
    for token in (approval_token(ports, request_id), latest_wait_token(ports, request_id)):
        if token:
            with contextlib.suppress(NotAwaitingApproval):  # the task already ended: nothing to answer
                ports.tasks.fail(token, error="ReservationCancelled", cause=f"cancelled by {actor}")
    ports.events.put(
        "ReleaseRequested", ReleaseRequestedDetail(request_id=request_id, reason=CANCELLED_REASON)
    )
    return "release requested"


def _hand_back(ports: Ports, item: Mapping[str, Any]) -> str:
    """Answer the waiting approval task with the recorded decision, then record ``APPROVAL_DELIVERED``.

    Raises:
        NotAwaitingApproval: the task no longer waits (timed out, or answered by an earlier hand-back).
    """
    request_id = str(item["request_id"])
    if ports.ledger.get(request_id, APPROVAL_DELIVERED) is not None:
        return "already handed back"  # by a door whose own marker was not written (it died in between)
    token = approval_token(ports, request_id)
    if token is None:
        raise NotAwaitingApproval(f"reservation {request_id} has no approval task to answer")
    decision = {key: item.get(key) for key in ("approved", "approver", "identity", "reason")}
    if item.get("approved"):
        ports.tasks.succeed(token, decision)
    else:
        reason = item.get("reason")
        cause = f"rejected by {item.get('approver')}" + (f": {reason}" if reason else "")
        ports.tasks.fail(token, error="ApprovalRejected", cause=cause)
    ports.ledger.put_once(request_id, APPROVAL_DELIVERED, {"token": token, "approved": item.get("approved")})
    return "approved: handed back" if item.get("approved") else "rejected: handed back"


def _extension_decision(ports: Ports, item: Mapping[str, Any]) -> str:
    """An approver's decision on an extension above the threshold: approved, ``ExtensionRequested`` (unless
    the workflow's intent shows it arrived); rejected, ``EXTENSION_OUTCOME#<id>`` ``rejected`` and
    ``ExtensionFailed`` (a roll-over waiting on it goes on)."""
    request_id = str(item["request_id"])
    extension_id = str(item["sk"]).split("#", 1)[1]
    approver = str(item.get("approver") or "an approver")
    if item.get("approved"):
        if ports.ledger.get(request_id, f"{EXTENSION_INTENT}#{extension_id}") is not None:
            return "approved: its purchase had started"
        asked = ports.ledger.get(request_id, f"{EXTENSION_APPROVAL}#{extension_id}") or {}
        offering = ExtensionOffering.model_validate(asked["offering"])
        put_extension_request(ports, request_id, offering, requester=str(asked.get("requester") or ""))
        return "approved: extension requested"
    ports.ledger.put_once(
        request_id,
        f"{EXTENSION_OUTCOME}#{extension_id}",
        {"outcome": "rejected", "reason": f"rejected by {approver}", "actor": ports.actor},
    )
    purchase = load_purchase(ports, request_id)
    ports.events.put(
        "ExtensionFailed",
        ExtensionFailedDetail(
            request_id=request_id,
            extension_id=extension_id,
            reason=f"the extension was rejected by {approver}",
            end_time=current_end(ports, request_id, purchase) if purchase is not None else None,
        ),
    )
    return "rejected: extension failed"


def _extension_request(ports: Ports, item: Mapping[str, Any]) -> str:
    """An extension asked for below the threshold: ``ExtensionRequested`` (the workflow buys it once per
    extension id, and refuses it again from the ledger if the money rules no longer allow it)."""
    request_id = str(item["request_id"])
    offering = ExtensionOffering.model_validate(item["offering"])
    if ports.ledger.get(request_id, f"{EXTENSION_INTENT}#{offering.offering_id}") is not None:
        return "its purchase had started"
    put_extension_request(ports, request_id, offering, requester=str(item.get("requester") or ""))
    return "extension requested"


def put_extension_request(
    ports: Ports, request_id: str, offering: ExtensionOffering, *, requester: str
) -> None:
    """Put ``ExtensionRequested`` for ``offering`` (its id is the extension id: the workflow buys it once,
    however often this is put).

    Raises:
        RetryableAwsError: the bus failed.
    """
    detail = ExtensionRequestedDetail(
        request_id=request_id, extension_id=offering.offering_id, offering=offering, requester=requester
    )
    ports.events.put("ExtensionRequested", detail)


def _serve_until(ports: Ports, item: Mapping[str, Any]) -> str:
    """A PATCH of ``serve_until``: ``ServeUntilChanged``, so the roll-over puts or moves its schedule."""
    until = item.get("serve_until")
    ports.events.put(
        "ServeUntilChanged",
        ServeUntilChangedDetail(
            request_id=str(item["request_id"]),
            serve_until=parse_utc(str(until)) if until else None,
            rollover_lead_hours=int(item["rollover_lead_hours"]),
            actor=str(item.get("actor") or ""),
        ),
    )
    return "roll-over told"


def _release(ports: Ports, item: Mapping[str, Any]) -> str:
    """A release asked for again (a repeated cancel): ``ReleaseRequested`` with the recorded reason."""
    reason = str(item.get("reason") or CANCELLED_REASON)
    ports.events.put(
        "ReleaseRequested", ReleaseRequestedDetail(request_id=str(item["request_id"]), reason=reason)
    )
    return "release requested"


def _submit(ports: Ports, item: Mapping[str, Any]) -> str:
    """A request a door accepted (202): ``ReservationRequested``, unless its workflow recorded it already."""
    request_id = str(item["request_id"])
    if ports.ledger.get(request_id, REQUEST) is not None:
        return "already recorded by its workflow"
    ports.events.put("ReservationRequested", ReservationRequestedDetail(request=dict(item["request"])))
    return "reservation requested"


_EFFECTS: dict[str, Callable[[Ports, Mapping[str, Any]], str]] = {
    CANCEL: _cancel,
    HAND_BACK: _hand_back,
    EXTENSION_DECISION: _extension_decision,
    EXTENSION_REQUEST: _extension_request,
    SERVE_UNTIL: _serve_until,
    RELEASE: _release,
    SUBMIT: _submit,
}
