"""The doors' side of an extension (issue 17): the dry run, the request, and the approval of an extension
above the approval threshold. :mod:`capacity.logic.continuity.extend` is the workflow's side (buy once,
confirm).

An approval follows the purchase approval's rules (:func:`capacity.logic.governance.policy.may_approve`: an
approver of the team, never the requester; the authenticated identity is recorded, never a body's word), keyed
by the
extension id in the ledger:

1. The request (``POST /reservations/{id}/extensions`` with ``offering_id``, Slack's Extend button) of an
   extension above the threshold records ``EXTENSION_APPROVAL#<id>`` (requester, offering) once, asks the
   thread with Approve/Reject buttons, puts ``ExtensionApprovalRequested`` and answers ``APPROVAL_REQUIRED``;
   nothing is requested from the workflow yet. Below the threshold it records ``EXTENSION_REQUEST#<id>``,
   whose effect is ``ExtensionRequested`` (:mod:`capacity.logic.steps.outbox`).
2. The decision (``POST /reservations/{id}/extensions/{extension_id}/approval``, the buttons) is recorded
   first, conditionally (``EXTENSION_DECISION#<id>``: only the first counts), and the record is the trigger
   of its effect (the outbox: tried at once, carried out from the ledger's stream whatever happens to the
   try). Approved: ``ExtensionRequested`` (again on every approving call until the workflow has started;
   the workflow buys once per extension id). Rejected: ``EXTENSION_OUTCOME#<id>`` ``rejected``, nothing is
   bought, and ``ExtensionFailed`` is put (a roll-over waiting on it goes on).
3. The workflow reads the decision from the ledger (:func:`capacity.logic.continuity.extend.approved_fee`), so
   an ``ExtensionRequested`` sent by anyone else is refused above the threshold, and a stale offering is
   replaced only by one that costs no more than the approved fee.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from capacity import messages
from capacity.base import Model
from capacity.errors import (
    BudgetExceeded,
    ExtensionApprovalRequired,
    ExtensionRefused,
    FieldError,
    InvalidRequest,
    NotAwaitingApproval,
    TeamLimitExceeded,
)
from capacity.logic.continuity.extend import (
    MAX_EXTENSION_HOURS,
    current_end,
    extendable,
    require_extension_allowed,
    search_extensions,
)
from capacity.logic.continuity.extension_ask import ask_approval
from capacity.logic.governance import policy
from capacity.logic.steps import outbox
from capacity.logic.steps.common import load_request, post
from capacity.offerings import ExtensionOffering
from capacity.ports import Ports
from capacity.pricing import format_usd
from capacity.record_kinds import EXTENSION_APPROVAL, EXTENSION_DECISION, EXTENSION_OFFER, EXTENSION_REQUEST
from capacity.timeutil import iso_z
from capacity.validation import parse_model


class ExtensionBody(Model):
    """Body of ``POST /reservations/{id}/extensions``: ``duration_hours`` (whole days; capacity blocks: 1-14
    days then weeks) and, to buy, the ``offering_id`` a dry run listed."""

    model_config = ConfigDict(extra="forbid")

    duration_hours: int = Field(default=24, ge=24, le=MAX_EXTENSION_HOURS, multiple_of=24)
    offering_id: str | None = Field(default=None, min_length=1, max_length=256)


class ExtensionDecision(Model):
    """Body of ``POST /reservations/{id}/extensions/{extension_id}/approval``: ``approved``, an optional
    ``reason``; ``approver``, when given, must be the authenticated caller (who approves is who signed)."""

    model_config = ConfigDict(extra="forbid")

    approved: bool
    reason: str | None = Field(default=None, max_length=1000)
    approver: str | None = Field(default=None, max_length=2048)


def request_extension(request_id: str, body: Any, ports: Ports, *, requester: str) -> dict[str, Any]:
    """``POST /reservations/{id}/extensions``: without ``offering_id`` a dry run (the offerings with their
    fee, new end, on-demand equivalent, whether the money rules allow them and whether an approval is needed,
    each kept as ``EXTENSION_OFFER#<id>``); with one a dry run listed, the purchase is requested
    (``ExtensionRequested``, once per offering id: its expiry is the workflow's, which searches again within
    the rules), or, above the approval threshold, an approval is asked for (module docstring).

    Returns:
        Dry run: ``{"request_id", "dry_run": True, "current_end", "offerings": [...]}``; purchase:
        ``{"request_id", "dry_run": False, "extension_id", "status", "offering"}`` with ``status``
        ``EXTENSION_REQUESTED`` or ``APPROVAL_REQUIRED`` (then ``approval``: how to answer).

    Raises:
        InvalidRequest: the body is invalid.
        ReservationNotFound: unknown reservation, one ``viewer`` may not see, or nothing bought.
        ExtensionRefused: cannot be extended; a stale ``offering_id`` (the message lists a fresh search); its
            approval was rejected.
        BudgetExceeded, TeamLimitExceeded: the extension would exceed the budget or the team's month.
    """
    parsed = parse_model(ExtensionBody, body if body is not None else {})
    request, purchase = extendable(ports, request_id)
    offered = (
        ports.ledger.get(request_id, f"{EXTENSION_OFFER}#{parsed.offering_id}")
        if parsed.offering_id
        else None
    )
    if offered is not None:
        chosen = ExtensionOffering.model_validate(offered["offering"])
    else:
        offerings = search_extensions(ports, request_id, parsed.duration_hours)
        for offering in offerings:  # what a purchase may name: the money rules read it back from the ledger
            ports.ledger.put_once(
                request_id,
                f"{EXTENSION_OFFER}#{offering.offering_id}",
                {"offering": offering.model_dump(mode="json")},
            )
        if parsed.offering_id is None:
            return {
                "request_id": request_id,
                "dry_run": True,
                "current_end": iso_z(current_end(ports, request_id, purchase)),
                "offerings": [_listed(request, ports, offering) for offering in offerings],
            }
        fresh = ", ".join(
            f"{item.offering_id} ({format_usd(item.upfront_fee_usd)}, to {iso_z(item.end_time)})"
            for item in offerings
        )
        raise ExtensionRefused(
            f"extension offering {parsed.offering_id} was not offered for {request_id} (stale or unknown); a "
            f"fresh search found: {fresh or 'none'}"
        )
    answer: dict[str, Any] = {
        "request_id": request_id,
        "dry_run": False,
        "extension_id": chosen.offering_id,
        "offering": chosen.model_dump(mode="json"),
    }
    try:
        require_extension_allowed(request, ports, chosen, extension_id=chosen.offering_id)
    except ExtensionApprovalRequired as needed:
        _refuse_if_rejected(ports, request_id, chosen.offering_id)
        ask_approval(ports, request_id, chosen, requester=requester, reason=str(needed))
        return answer | {
            "status": "APPROVAL_REQUIRED",
            "approval": f"POST /reservations/{request_id}/extensions/{chosen.offering_id}/approval "
            "by an approver of the team (never the requester), or the buttons in Slack",
        }
    # The request is recorded, and the record is the trigger of ExtensionRequested (the outbox).
    asked = {
        "requester": requester,
        "offering": chosen.model_dump(mode="json"),
        "actor": ports.actor,
        outbox.EFFECT: outbox.EXTENSION_REQUEST,
    }
    sk = f"{EXTENSION_REQUEST}#{chosen.offering_id}"
    _, stored = ports.ledger.put_once(request_id, sk, asked)
    outbox.attempt(ports, stored | {outbox.EFFECT: outbox.EXTENSION_REQUEST})
    return answer | {"status": "EXTENSION_REQUESTED"}


def _listed(request: Any, ports: Ports, offering: ExtensionOffering) -> dict[str, Any]:
    """A dry run's line: the offering, ``allowed`` (an approval needed still allows it), ``problem``,
    ``approval_required``."""
    problem: str | None = None
    approval = False
    try:
        require_extension_allowed(request, ports, offering, extension_id=offering.offering_id)
    except ExtensionApprovalRequired:
        approval = True
    except (BudgetExceeded, ExtensionRefused, TeamLimitExceeded) as exc:
        problem = str(exc)
    return {
        **offering.model_dump(mode="json"),
        "allowed": problem is None,
        "problem": problem,
        "approval_required": approval,
    }


def _refuse_if_rejected(ports: Ports, request_id: str, extension_id: str) -> None:
    decision = ports.ledger.get(request_id, f"{EXTENSION_DECISION}#{extension_id}")
    if decision is not None and not decision.get("approved"):
        raise ExtensionRefused(
            f"extension {extension_id} of {request_id} was rejected by {decision.get('approver')} at "
            f"{decision.get('written_at', '?')}; nothing was bought (a dry run lists other offerings)"
        )


def decide_extension_approval(
    request_id: str,
    extension_id: str,
    body: Any,
    ports: Ports,
    *,
    identity: str | None,
    viewer: policy.Viewer | None = None,
) -> dict[str, Any]:
    """Approve or reject the extension ``extension_id`` of ``request_id`` (module docstring, step 2).

    Args:
        body: :class:`ExtensionDecision`.
        identity: the caller's authenticated identity (API: the IAM ARN; Slack: ``slack:<user id>``).
        viewer: what the caller may see (:func:`~capacity.logic.governance.policy.require_seen`: one who may
        not is
            answered 404 first); None: unscoped.

    Returns:
        ``{"request_id", "extension_id", "approved", "status": "APPROVED" | "REJECTED", "approver"}``.

    Raises:
        InvalidRequest: the body is invalid, or the call carries no authenticated identity.
        ReservationNotFound: unknown reservation, one ``viewer`` may not see, or nothing bought.
        NotAwaitingApproval: no approval of this extension was asked for, or another decision came first.
        NotPermitted: the caller asked for the extension or requested the reservation (four-eyes), is not an
            approver of its team, or the body names another approver (recorded as ``APPROVAL_REFUSED#``).
        ExtensionRefused: the reservation can no longer be extended (released, cancelled...).
        RetryableAwsError: the ledger failed (nothing recorded: send it again). Its effect failing after the
            decision is recorded is not an error: the outbox carries it out.
    """
    decision = parse_model(ExtensionDecision, body)
    if not identity:
        raise InvalidRequest(
            [FieldError("approver", "is unknown: the call carries no authenticated identity")]
        )
    policy.require_seen(ports, request_id, viewer)
    request = load_request(ports, request_id)
    asked = ports.ledger.get(request_id, f"{EXTENSION_APPROVAL}#{extension_id}")
    if asked is None:
        raise NotAwaitingApproval(f"no extension {extension_id!r} of {request_id} waits for approval")
    requester = str(asked.get("requester") or "")
    policy.check_approver(
        ports,
        request_id,
        identity=identity,
        named=decision.approver,
        approved=decision.approved,
        requesters=[requester or None, request.requester],
        team_name=request.team,
        extension_id=extension_id,
    )
    extendable(ports, request_id)  # released or cancelled meanwhile: nothing to decide any more
    created, stored = ports.ledger.put_once(
        request_id,
        f"{EXTENSION_DECISION}#{extension_id}",
        {
            "approved": decision.approved,
            "approver": identity,
            "reason": decision.reason,
            outbox.EFFECT: outbox.EXTENSION_DECISION,
        },
    )
    approved = bool(stored.get("approved"))
    if not created and approved != decision.approved:
        raise NotAwaitingApproval(
            f"extension {extension_id} of {request_id} was already {'approved' if approved else 'rejected'} "
            f"by {stored.get('approver')} at {stored.get('written_at', '?')}; that decision stands"
        )
    # The record is the trigger of its effect (the outbox): approved, ExtensionRequested (again on a repeated
    # approval, until the workflow's intent shows it arrived); rejected, the outcome and ExtensionFailed once.
    if approved or created:
        outbox.attempt(ports, stored | {outbox.EFFECT: outbox.EXTENSION_DECISION})
    if created:
        post(
            ports,
            messages.extension_approval_decided(
                request_id, extension_id, approved=approved, approver=str(stored.get("approver"))
            ),
        )
    return {
        "request_id": request_id,
        "extension_id": extension_id,
        "approved": approved,
        "status": "APPROVED" if approved else "REJECTED",
        "approver": str(stored.get("approver") or identity),
    }
