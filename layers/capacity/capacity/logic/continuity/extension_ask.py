"""Asking for an extension (issue 17): put ``ExtensionRequested`` for an offering, or, above the approval
threshold, record the approval asked for and ask an approver. The roll-over asks on the requester's behalf
(:mod:`capacity.logic.continuity.rollover`); the extension door asks for a caller
(:mod:`capacity.logic.doors.extension_request`, which also records the decisions)."""

from __future__ import annotations

from capacity import messages
from capacity.events import ExtensionApprovalRequestedDetail
from capacity.logic.governance import policy
from capacity.logic.steps import outbox
from capacity.logic.steps.common import post
from capacity.offerings import ExtensionOffering
from capacity.ports import Ports
from capacity.record_kinds import EXTENSION_APPROVAL


def put_request(ports: Ports, request_id: str, offering: ExtensionOffering, *, requester: str) -> None:
    """Put ``ExtensionRequested`` for ``offering`` (its id is the extension id: the workflow buys it once,
    however often this is put): what the roll-over asks on the requester's behalf (it puts it again while
    no intent shows it arrived); a door records its request instead (:mod:`capacity.logic.steps.outbox`).

    Raises:
        RetryableAwsError: the bus failed.
    """
    outbox.put_extension_request(ports, request_id, offering, requester=requester)


def ask_approval(
    ports: Ports, request_id: str, offering: ExtensionOffering, *, requester: str, reason: str
) -> None:
    """Record the approval of ``offering`` asked for (``EXTENSION_APPROVAL#<id>``, once) and, the first time,
    ask the thread (Approve/Reject buttons) and put ``ExtensionApprovalRequested``.

    Raises:
        RetryableAwsError: the ledger or the bus failed.
    """
    extension_id = offering.offering_id
    created, _ = ports.ledger.put_once(
        request_id,
        f"{EXTENSION_APPROVAL}#{extension_id}",
        {"actor": ports.actor, "requester": requester, "offering": offering.model_dump(mode="json")},
    )
    if not created:
        return
    request = ports.ledger.get_request(request_id)
    # The threshold that made the approval needed: the team's when lower than the request's.
    threshold = policy.as_admitted(request, ports).approval_above_usd if request is not None else None
    ports.events.put(
        "ExtensionApprovalRequested",
        ExtensionApprovalRequestedDetail(
            request_id=request_id,
            extension_id=extension_id,
            offering=offering,
            requester=requester,
            approval_above_usd=threshold,
        ),
    )
    post(
        ports,
        messages.extension_approval_request(
            request_id,
            extension_id,
            offering.model_dump(mode="json"),
            requester=requester,
            reason=reason,
        ),
    )
