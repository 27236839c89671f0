"""The REST API's logic (``functions/api``): submit, read, approve and cancel reservations.

Over 400 lines: the REST door's operations, one function each, behind one router.

- ``POST /reservations``: validate (:func:`~capacity.request.parse_request`), then put
  ``ReservationRequested`` on the bus once per ``request_id`` (Powertools idempotency keyed on the
  request id, table env ``IDEMPOTENCY_TABLE``): a repeated POST answers the same body and puts nothing.
- ``GET /reservations/{id}``: the ledger history and the current state.
- ``GET /reservations?status=&limit=&next_token=``: the reservations, newest first, optionally only those
  whose current state is ``status`` (ledger GSI ``listing``; ``next_token`` is opaque).
- ``POST /reservations/{id}/approval``: records the decision (the first one counts); the record is the
  trigger of ``SendTaskSuccess``/``SendTaskFailure`` (error ``ApprovalRejected``) with the stored task token
  (:mod:`capacity.logic.steps.outbox`: tried at once, carried out from the ledger's stream whatever happens to
  the try).
- ``DELETE /reservations/{id}``: records ``CANCELLED``, whose effect (the outbox's) fails a pending approval
  task with ``ReservationCancelled`` (no ``REJECTED``) and puts ``ReleaseRequested`` (reason ``cancelled``);
  a repeated DELETE answers 202 and, while something bought may still bill (a ``PURCHASE`` or
  ``PURCHASE_INTENT`` and no ``RELEASED``), records the release asked for again (``RELEASE_REQUEST#``).
- ``POST /reservations`` records ``SUBMITTED`` with the request: its effect is ``ReservationRequested``.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ConfigDict, Field

from capacity.base import Model
from capacity.errors import (
    DuplicateRequest,
    FieldError,
    InvalidRequest,
    NotAwaitingApproval,
    PaidReservation,
    ReservationClosed,
    ReservationNotFound,
)
from capacity.ledger import LISTING, history_of
from capacity.lifecycle import Event
from capacity.logic.continuity import extend
from capacity.logic.continuity.attempts import live_intent
from capacity.logic.continuity.chain import chain_view, serving_target, successors
from capacity.logic.governance.checks import require_in_scope
from capacity.logic.governance.costs import reservation_spend
from capacity.logic.governance.policy import Viewer, charged_to, check_approver, may_act, require_seen
from capacity.logic.steps import outbox
from capacity.logic.steps.common import final_state, load_purchase, states
from capacity.offerings import OfferingSummary
from capacity.platforms import platform
from capacity.ports import Ports
from capacity.pricing import format_usd
from capacity.purchases import parse_purchase
from capacity.record_kinds import (
    APPROVAL_DECISION,
    APPROVAL_DELIVERED,
    CANCEL_REQUESTED,
    OUTCOME,
    PURCHASE,
    PURCHASE_INTENT,
    PURCHASE_VOIDED,
    RELEASE_REQUEST,
    RELEASED_MARKER,
    REQUEST,
    SUBMITTED,
)
from capacity.records import State
from capacity.request import parse_request, require_not_a_successor
from capacity.timeutil import iso_ms, iso_z, parse_utc
from capacity.validation import field_problems, parse_model
from capacity.wire import StrictBool

IDEMPOTENCY_TTL = timedelta(days=7)
MAX_LIST_LIMIT = 100
_TOKEN_KEYS = frozenset({"request_id", "sk", "listing", "written_at"})
_SCAN_FACTOR = 10
"""A filtered listing reads at most ``limit * 10`` reservations per call, then answers with a token."""


def links(request_id: str) -> dict[str, str]:
    """Where to follow, approve or cancel the reservation (paths relative to the API stage)."""
    return {
        "self": f"/reservations/{request_id}",
        "approval": f"/reservations/{request_id}/approval",
        "cancel": f"/reservations/{request_id}",
    }


def submit_reservation(
    body: Any,
    ports: Ports,
    *,
    persistence: BasePersistenceLayer | None,
    lambda_context: LambdaContext | None = None,
    actor: str = "api",
    requester: str | None = None,
) -> dict[str, Any]:
    """Validate a request and put ``ReservationRequested`` once per ``request_id``.

    ``requester`` is the authenticated caller (the API's IAM principal ARN, a schedule's owner): it replaces
    whatever ``requester`` the body names (kept as ``requester_as_sent`` on ``SUBMITTED``), and the request is
    charged to the caller's team (:func:`~capacity.logic.governance.policy.resolve_team`; the body's ``team``
    picks one of the caller's teams). ``actor`` is recorded on the ``SUBMITTED`` item (the caller, or
    ``schedule:<name>`` for a schedule's run).

    Returns:
        The 202 body ``{"request_id", "status": "REQUESTED", "links"}`` (the same for a repeated POST).

    Raises:
        InvalidRequest: the request is invalid (each error names the field).
        OutOfScope: it names a model bucket or an instance role the deployment does not allow (400).
        IdempotencyAlreadyInProgressError: the same request id is being submitted right now.
        DuplicateRequest: the request id was already submitted with a different body.
        NotPermitted: the caller is in no team, or not in the team the body names (403).
    """
    sent_requester = body.get("requester") if isinstance(body, Mapping) else None
    if requester is not None and isinstance(body, Mapping):
        body = charged_to(body, requester, ports)
    request = parse_request(body, now=ports.clock())
    require_not_a_successor(request)
    require_in_scope(request, ports)  # before anything is put: buckets and instance roles allowed
    payload = request.model_dump(mode="json")
    submitted = {"actor": actor, "requester": request.requester, "team": request.team}
    if sent_requester is not None and sent_requester != request.requester:
        submitted["requester_as_sent"] = str(sent_requester)[:2048]

    def publish(request: dict[str, Any]) -> dict[str, Any]:
        # Known from now on: a DELETE before the workflow records the request is remembered, not a 404. The
        # record is the trigger of ReservationRequested (the outbox): a 202 always reaches the workflow.
        decision = submitted | {outbox.EFFECT: outbox.SUBMIT, "request": request}
        ports.ledger.put_once(request["request_id"], SUBMITTED, decision)
        outbox.attempt(ports, decision | {"request_id": request["request_id"], "sk": SUBMITTED})
        return {
            "request_id": request["request_id"],
            "status": State.REQUESTED.value,
            "links": links(request["request_id"]),
        }

    if persistence is None:
        return publish(request=payload)
    config = IdempotencyConfig(
        event_key_jmespath="request_id",
        raise_on_no_idempotency_key=True,
        payload_validation_jmespath="@",  # the whole validated request: another body is a conflict
        expires_after_seconds=int(IDEMPOTENCY_TTL.total_seconds()),
    )
    if lambda_context is not None:
        config.register_lambda_context(lambda_context)
    once = idempotent_function(data_keyword_argument="request", persistence_store=persistence, config=config)(
        publish
    )
    try:
        result: dict[str, Any] = once(request=payload)
    except IdempotencyValidationError as exc:
        raise DuplicateRequest(
            f"request_id {request.id!r} was already submitted with a different body: send the same body "
            "to repeat it, or use a new request_id for a different request"
        ) from exc
    return result


def get_reservation(request_id: str, ports: Ports, *, viewer: Viewer | None = None) -> dict[str, Any]:
    """The reservation as the API shows it: request summary, purchase, current state and history (one ledger
    query: the history is read from the same items).

    Args:
        viewer: who reads (:class:`~capacity.logic.governance.policy.Viewer`); None: an internal read,
        unscoped.

    Raises:
        ReservationNotFound: nothing is recorded for ``request_id``, or ``viewer`` may not see it (404 too:
            whether it exists is not revealed).
    """
    items = ports.ledger.items(request_id)
    if not items:
        raise ReservationNotFound(f"no reservation {request_id!r}")
    by_sk = {item["sk"]: item for item in items}
    history = history_of(items)
    request = by_sk.get(REQUEST, {}).get("request") or {}
    # before the workflow recorded REQUEST (a POST whose event failed, then a DELETE), SUBMITTED names them
    owner = request or by_sk.get(SUBMITTED, {})
    if viewer is not None and not viewer.sees_request(owner):
        raise ReservationNotFound(f"no reservation {request_id!r}")
    purchase = by_sk.get(PURCHASE)
    return {
        "request_id": request_id,
        "state": history[-1].state.value if history else None,
        "request": {
            key: request.get(key)
            for key in (
                "requester",
                "instance_type",
                "instance_count",
                "earliest_start",
                "latest_end",
                "duration_hours",
                "regions",
                "max_upfront_fee_usd",
                "approval_above_usd",
                "dry_run",
                "team",
            )
        }
        | {"models": [m.get("name") for m in request.get("models", [])]},
        "purchase": purchase_view(purchase) if purchase else None,
        "history": [entry.model_dump(mode="json", exclude={"request_id", "sk"}) for entry in history],
        "spend": reservation_spend(ports, request_id, items=items),
        **_keep_serving(ports, request_id, items),
        "links": links(request_id),
    }


def purchase_view(item: Mapping[str, Any]) -> dict[str, Any]:
    """The ``PURCHASE`` item as ``GET /reservations/{id}`` shows it: ``kind``, ``platform``, ``market``, the
    reservation in its platform's own names (a training plan's ``training_plan_arn``/``training_plan_name``,
    a capacity block's ``capacity_reservation_arn``/``capacity_reservation_id``/``availability_zone``; none
    on demand), ``region``, ``start_time``/``end_time`` (UTC), ``upfront_fee_usd`` (USD) and ``brought``."""
    record = parse_purchase(item)
    window = record.model_dump(mode="json", include={"region", "start_time", "end_time", "upfront_fee_usd"})
    return {
        "kind": record.kind,
        "platform": record.platform,
        "market": record.market,
        **record.identifiers(),
        **window,
        "brought": record.brought,
    }


def _keep_serving(ports: Ports, request_id: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``serve_until`` and ``rollover_lead_hours`` as they stand (a PATCH's, else the request's) and the
    chain of reservations that keeps the models served (issue 17), from the items already read (a chain of
    one reads nothing more); a request not recorded yet has none."""
    recorded = next((item for item in items if item["sk"] == REQUEST), None)
    if recorded is None:
        return {"serve_until": None, "rollover_lead_hours": None, "chain": []}
    request = parse_request(recorded["request"], now=None)
    target = serving_target(ports, request, items=items)
    return {
        "serve_until": iso_z(target.serve_until) if target.serve_until else None,
        "rollover_lead_hours": target.lead_hours,
        "chain": chain_view(ports, request_id, items=items),
    }


class ApprovalDecision(Model):
    """Body of ``POST /reservations/{id}/approval``."""

    model_config = ConfigDict(extra="forbid")

    approved: StrictBool
    approver: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="who decides: always the authenticated caller; if given it must be the caller's identity "
        "(it never names someone else)",
    )
    reason: str | None = Field(default=None, max_length=1000)


def decide_approval(
    request_id: str,
    body: Any,
    ports: Ports,
    *,
    identity: str | None = None,
    viewer: Viewer | None = None,
) -> dict[str, Any]:
    """Answer the waiting approval task with the stored token.

    Args:
        body: :class:`ApprovalDecision`.
        identity: the caller's authenticated identity (API: the IAM ARN from the request context; Slack:
            ``slack:<user id>``), recorded as the ``approver``.
        viewer: what the caller may see (:func:`~capacity.logic.governance.policy.require_seen`: one who may
        not is
            answered 404, before anything says the reservation exists); None: unscoped.

    Returns:
        ``{"request_id", "approved", "status", "approver"}``.

    Raises:
        InvalidRequest: the body is invalid, or there is no authenticated identity.
        ReservationNotFound: unknown reservation, or one ``viewer`` may not see.
        NotPermitted: the caller requested the reservation (four-eyes), is not an approver of its team, or the
            body names another approver (403; recorded as ``APPROVAL_REFUSED#<time>``).
        NotAwaitingApproval: the reservation is not waiting for approval, the task no longer waits, or
            another decision was recorded first (it is handed back if that had not happened yet).
        RetryableAwsError: the ledger failed (503: nothing recorded, send it again). A hand-back that fails
            after the decision is recorded is not an error: the outbox hands the decision back.
    """
    decision = parse_model(ApprovalDecision, body)
    if not identity:
        raise InvalidRequest(
            [FieldError("approver", "is unknown: the call carries no authenticated identity")]
        )
    approver = identity  # who approves is who authenticated, never what a body says
    require_seen(ports, request_id, viewer)
    state = ports.ledger.current_state(request_id)
    if state is None:
        raise ReservationNotFound(f"no reservation {request_id!r}")
    token = outbox.approval_token(ports, request_id)
    if state is not State.AWAITING_APPROVAL or token is None:
        raise NotAwaitingApproval(f"reservation {request_id} is {state.value}, not awaiting approval")
    request = ports.ledger.get_request(request_id)
    check_approver(
        ports,
        request_id,
        identity=identity,
        named=decision.approver,
        approved=decision.approved,
        requesters=[request.requester if request else None],
        team_name=request.team if request else None,
    )
    answer = {
        "approved": decision.approved,
        "approver": approver,
        "identity": identity,
        "reason": decision.reason,
        outbox.EFFECT: outbox.HAND_BACK,
    }
    # The decision is recorded first, conditionally: only the first decision counts. The record is the
    # trigger of its hand-back (the outbox: from the ledger's stream, until it was delivered once), so a
    # throttled SendTaskSuccess never loses an approval; the hand-back is tried here too, for speed, and so
    # that a task that no longer waits answers 409. A repeated call hands back what was not delivered yet.
    created, stored = ports.ledger.put_once(request_id, APPROVAL_DECISION, answer)
    if not created and ports.ledger.get(request_id, APPROVAL_DELIVERED) is not None:
        raise NotAwaitingApproval(_already(request_id, stored))
    outbox.attempt(ports, stored | {outbox.EFFECT: outbox.HAND_BACK})
    if not created and bool(stored.get("approved")) != decision.approved:
        raise NotAwaitingApproval(
            _already(request_id, stored) + " (that decision stands; it was passed on now)"
        )
    return {
        "request_id": request_id,
        "approved": bool(stored.get("approved")),
        "status": "APPROVED" if stored.get("approved") else "REJECTED",
        "approver": str(stored.get("approver") or approver),
    }


def _already(request_id: str, stored: Mapping[str, Any]) -> str:
    verdict = "approved" if stored.get("approved") else "rejected"
    return (
        f"reservation {request_id} was already {verdict} at {stored.get('written_at', '?')} "
        f"by {stored.get('approver') or stored.get('actor') or 'unknown'}"
    )


def require_may_act(request_id: str, viewer: Viewer, ports: Ports, *, doing: str) -> None:
    """Refuse ``doing`` (``cancel``, ``extend``, ``keep serving``) to ``request_id`` by ``viewer``'s
    identity: one who may not see it is answered as if it did not exist
    (:func:`~capacity.logic.governance.policy.require_seen`); one who sees it acts only when
    :func:`~capacity.logic.governance.policy.may_act` allows (its requester, team members and team approvers;
    an administrator sees every reservation but acts on none of another team's).

    Raises:
        ReservationNotFound: 404, ``viewer`` may not see it (or it is unknown).
        NotPermitted: 403, nothing done.
        SlackUnavailable, ConfigurationError: a Slack user group of the team could not be read.
    """
    owner = require_seen(ports, request_id, viewer)
    requester, team = owner.get("requester"), owner.get("team")
    may_act(
        viewer.identity,
        str(requester) if requester else None,
        str(team) if team else None,
        ports,
        doing=doing,
    )


def cancel_reservation(request_id: str, ports: Ports, *, actor: str, confirm: bool = False) -> dict[str, Any]:
    """Cancel ``request_id`` (:func:`_cancel_one`) and the successors requested to keep it serving
    (``serve_until``, issue 17): stopping a reservation stops its chain, never half of it. Without ``confirm``
    any paid one among them refuses the whole cancel first (nothing recorded), naming every fee at stake in
    the chain (:func:`stake_text`).

    Returns:
        ``{"request_id", "status", "links"}`` of ``request_id``, and ``successors`` (their statuses) when it
        had any.

    Raises:
        ReservationNotFound, ReservationClosed, PaidReservation, RetryableAwsError: as :func:`_cancel_one`.
    """
    following = [s for s in successors(ports, request_id) if not final_state(ports.ledger.history(s))]
    if not confirm:
        ledger = ports.ledger
        open_here = (
            not final_state(ledger.history(request_id)) and ledger.get(request_id, RELEASED_MARKER) is None
        )
        _refuse_unconfirmed(ports, ([request_id] if open_here else []) + following)
    result = _cancel_one(request_id, ports, actor=actor, confirm=True)  # asked above when not confirmed
    if following:
        result["successors"] = [
            _cancel_one(successor, ports, actor=actor, confirm=True)["status"] for successor in following
        ]
    return result


def _cancel_one(request_id: str, ports: Ports, *, actor: str, confirm: bool = False) -> dict[str, Any]:
    """Cancel: record ``CANCELLED``, reject a pending approval, end a wait between two looks (keep looking),
    put ``ReleaseRequested`` (``cancelled``).

    A reservation whose upfront fee is paid (a training plan or capacity block bought and not voided), or
    whose purchase call is on its way (an intent without its outcome), is cancelled only with ``confirm``:
    without it :class:`~capacity.errors.PaidReservation` (409) names the sunk fee (never refunded:
    AWS_FACTS.md), its paid extensions and those in flight, and what cancelling still saves (nothing: the fee
    covers the whole reservation), and nothing is recorded (:func:`cancel_reservation` asks this of the whole
    chain at once).

    Returns:
        ``{"request_id", "status": "CANCELLED", "links"}``.

    ``CANCELLED`` is the decision, and its record the trigger of its effect
    (:mod:`capacity.logic.steps.outbox`: the waiting tasks failed, ``ReleaseRequested``), tried here at once
    and carried out from the ledger's stream whatever happens to that try: a cancel whose ``ReleaseRequested``
    failed on both of the client's tries once left an on-demand endpoint billing 71 hours more.

    A second DELETE (already cancelled, rejected or failed) answers the same way and, while anything bought
    may still bill (:func:`_may_bill`), records the release asked for again (``RELEASE_REQUEST#``, carried
    out the same way): the release is idempotent.

    Raises:
        ReservationNotFound: unknown reservation.
        ReservationClosed: already released.
        PaidReservation: the fee is paid and ``confirm`` is False (409; nothing changed).
        RetryableAwsError: the ledger failed (503: send the DELETE again).
    """
    ledger = ports.ledger
    history = ledger.history(request_id)
    if not history and ledger.get(request_id, REQUEST) is None:
        if ledger.get(request_id, SUBMITTED) is None:
            raise ReservationNotFound(f"no reservation {request_id!r}")
        # Submitted but not recorded yet (the event on its way, or the POST failed after SUBMITTED): leave a
        # marker record_request checks after writing REQUEST, and the outcome, so GET says what DELETE did.
        ledger.put_once(request_id, CANCEL_REQUESTED, {"actor": actor})
        if ledger.get(request_id, REQUEST) is None:  # record_request will see the marker and stop
            ledger.record(
                request_id, Event.CANCEL, actor=actor, detail={"reason": "cancelled", "before": "recorded"}
            )
            return {"request_id": request_id, "status": State.CANCELLED.value, "links": links(request_id)}
        history = ledger.history(request_id)  # recorded meanwhile: cancel it the usual way
    seen = states(history)
    if State.RELEASED in seen:
        raise ReservationClosed(f"reservation {request_id} is already released")
    final = final_state(history)
    if final is not None:  # already cancelled, rejected or failed: request the release again if needed
        if _may_bill(ports, request_id):
            again = {"reason": outbox.CANCELLED_REASON, "actor": actor, outbox.EFFECT: outbox.RELEASE}
            sk = f"{RELEASE_REQUEST}#{iso_ms(ports.clock())}#{uuid.uuid4().hex[:8]}"
            _, stored = ledger.put_once(request_id, sk, again)
            outbox.attempt(ports, stored)
        return {"request_id": request_id, "status": final.value, "links": links(request_id)}
    if not confirm:
        _refuse_unconfirmed(ports, [request_id])
    # CANCELLED is recorded before the waiting task is failed, so the workflow's failure path (which
    # records nothing after a final state) leaves CANCELLED as the only final state.
    detail = {"reason": outbox.CANCELLED_REASON}
    written = ledger.record(request_id, Event.CANCEL, actor=actor, detail=detail)
    if written is None:  # a concurrent DELETE (or a rejection, a failure) recorded the outcome first
        final = final_state(ledger.history(request_id)) or State.CANCELLED
        return {"request_id": request_id, "status": final.value, "links": links(request_id)}
    # The effect reads the tokens after the outcome is recorded, not judged from the history read before: an
    # approval step racing this DELETE stores its token first and the lifecycle refuses AWAITING_APPROVAL
    # after CANCELLED, so either it sees CANCELLED or its token is seen. A request that keeps looking waits
    # between two looks the same way: its wait ends now, not at its next look (keep_looking.search_wait
    # writes its token before it reads the outcome).
    cancelled = {"outcome": State.CANCELLED.value, "actor": actor, "detail": detail}
    outbox.attempt(ports, cancelled | {"request_id": request_id, "sk": OUTCOME})
    return {"request_id": request_id, "status": State.CANCELLED.value, "links": links(request_id)}


def sunk_fee(ports: Ports, request_id: str) -> dict[str, Any] | None:
    """What cancelling ``request_id`` loses: ``{"upfront_fee_usd", "refunded_usd": "0", "saves_usd": "0",
    "what", "end_time", "purchase_on_its_way"}`` (and for a paid reservation ``extension_fees_usd``, its
    paid extensions, and ``extensions_in_flight`` ``[{"extension_id", "upfront_fee_usd"}]``, whose payment
    AWS may still take: :func:`~capacity.logic.continuity.extend.fees_in_flight`) for a paid training plan or
    capacity block (not voided), or one whose purchase call is on its way (:func:`_fee_on_its_way`); None when
    nothing upfront is paid or being paid (nothing bought, on demand, or AWS charged nothing)."""
    purchase = load_purchase(ports, request_id)
    if purchase is None:
        return _fee_on_its_way(ports, request_id)
    if purchase.market != "reserved" or purchase.upfront_fee_usd <= 0:
        return None
    if ports.ledger.get(request_id, PURCHASE_VOIDED) is not None:
        return None
    what = platform(purchase.platform).reserved_noun
    return {
        "upfront_fee_usd": f"{purchase.upfront_fee_usd:f}",
        "refunded_usd": "0",
        "saves_usd": "0",
        "what": f"{what} {purchase.name}",
        "end_time": iso_z(purchase.end_time),
        "purchase_on_its_way": False,
        "extension_fees_usd": f"{purchase.extension_fees_usd:f}",
        "extensions_in_flight": [
            {"extension_id": extension_id, "upfront_fee_usd": f"{fee:f}"}
            for extension_id, fee in extend.fees_in_flight(ports, request_id)
        ],
    }


def _fee_on_its_way(ports: Ports, request_id: str) -> dict[str, Any] | None:
    """The fee of a purchase on its way: the live attempt's intent is recorded and its outcome is not (no
    ``PURCHASE``, the attempt not closed by a miss, not voided). AWS may take the fee at any moment, and a
    cancel then releases what it buys at once: the same question as for a paid reservation."""
    intent = live_intent(ports, request_id)
    if intent is None or not intent.get("offering") or ports.ledger.get(request_id, PURCHASE_VOIDED):
        return None
    offering = OfferingSummary.model_validate(intent["offering"])
    what = platform(intent.get("platform")).reserved_noun
    return {
        "upfront_fee_usd": f"{offering.upfront_fee_usd:f}",
        "refunded_usd": "0",
        "saves_usd": "0",
        "what": f"{what} being bought (its purchase call is on its way)",
        "end_time": iso_z(offering.end_time),
        "purchase_on_its_way": True,
    }


def stake_text(at_stake: Sequence[Mapping[str, Any]]) -> str:
    """What cancelling throws away, one sentence per reservation at stake (``at_stake``: :func:`sunk_fee`'s
    dicts with their ``request_id``, the reservation first, then its successors): the upfront fee (paid, or
    being paid), the paid extensions and every extension whose payment is in flight, never refunded; with
    more than one fee, the total. No question at the end: each door asks in its own words."""
    sentences: list[str] = []
    for sunk in at_stake:
        rid, fee = sunk["request_id"], format_usd(Decimal(str(sunk["upfront_fee_usd"])))
        if sunk.get("purchase_on_its_way"):
            sentences.append(
                f"reservation {rid} has a {sunk['what']}: its upfront fee {fee} is paid upfront and not "
                "refunded; whatever it buys is released at once"
            )
            continue
        paid = Decimal(str(sunk.get("extension_fees_usd") or "0"))
        extensions = f"; its paid extensions {format_usd(paid)}, not refunded either" if paid > 0 else ""
        for item in sunk.get("extensions_in_flight") or []:
            flying = format_usd(Decimal(str(item["upfront_fee_usd"])))
            extensions += (
                f"; an extension ({item['extension_id']}) whose payment of {flying} is in flight: AWS may "
                "still take it, it is not refunded, and the release waits for it (at most until AWS's "
                "deadline)"
            )
        sentences.append(
            f"reservation {rid} has a paid {sunk['what']}: its upfront fee {fee} is not refunded and "
            f"cancelling saves nothing (the fee covers the reservation until {sunk['end_time']})"
            f"{extensions}; it only stops the endpoint or instances now"
        )
    text = ". ".join(
        sentence[:1].upper() + sentence[1:] if i else sentence for i, sentence in enumerate(sentences)
    )
    fees = sum((_fees(sunk) for sunk in at_stake), Decimal(0))
    if len(at_stake) > 1 or any(_fees(sunk) != Decimal(str(sunk["upfront_fee_usd"])) for sunk in at_stake):
        text += f". In all {format_usd(fees)} is not refunded"
    return text


def _fees(sunk: Mapping[str, Any]) -> Decimal:
    """Every fee at stake in one :func:`sunk_fee` answer: upfront, paid extensions, extensions in flight."""
    flying = sum(
        (Decimal(str(i["upfront_fee_usd"])) for i in sunk.get("extensions_in_flight") or []), Decimal(0)
    )
    return (
        Decimal(str(sunk["upfront_fee_usd"])) + Decimal(str(sunk.get("extension_fees_usd") or "0")) + flying
    )


def _refuse_unconfirmed(ports: Ports, request_ids: Sequence[str]) -> None:
    """Refuse a cancel of ``request_ids`` (a reservation and the successors it stops) that would throw money
    away, unconfirmed: one :class:`~capacity.errors.PaidReservation` naming every fee at stake
    (:func:`stake_text`); its details are the first one's :func:`sunk_fee` answer, ``at_stake`` (each of
    them, with its ``request_id``) and ``not_refunded_usd`` (their total).

    Raises:
        PaidReservation: something is paid or being paid among ``request_ids``.
    """
    at_stake = [
        {"request_id": rid, **sunk} for rid in request_ids if (sunk := sunk_fee(ports, rid)) is not None
    ]
    if not at_stake:
        return
    details: dict[str, Any] = {k: v for k, v in at_stake[0].items() if k != "request_id"}
    details["at_stake"] = at_stake
    details["not_refunded_usd"] = f"{sum(_fees(sunk) for sunk in at_stake):f}"
    raise PaidReservation(
        f"{stake_text(at_stake)}. Send DELETE again with ?confirm=true to cancel anyway", details
    )


def _may_bill(ports: Ports, request_id: str) -> bool:
    """Something bought for a reservation not yet ``RELEASED`` may still bill: a ``PURCHASE`` (or a
    ``PURCHASE_INTENT``: AWS may have taken the money) is recorded."""
    ledger = ports.ledger
    return ledger.get(request_id, PURCHASE) is not None or ledger.get(request_id, PURCHASE_INTENT) is not None


def caller(event: Mapping[str, Any]) -> str:
    """Who called the API (IAM auth: ``requestContext.identity.userArn``), for the ledger's actor."""
    context = event.get("requestContext") or {}
    identity = context.get("identity") or {}
    return str(identity.get("userArn") or identity.get("caller") or identity.get("user") or "api")


def _encode_token(item: Mapping[str, Any]) -> str:
    key = {name: str(item[name]) for name in sorted(_TOKEN_KEYS)}
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode().rstrip("=")


def _decode_token(token: str) -> dict[str, str]:
    message = "is not a token this API issued: pass next_token from the previous page as is"
    problem = InvalidRequest([FieldError("next_token", message)])
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise problem from exc
    if (
        not isinstance(key, dict)
        or set(key) != _TOKEN_KEYS
        or not all(isinstance(v, str) for v in key.values())
        or key["listing"] != LISTING
        or key["sk"] != REQUEST
    ):
        raise problem
    return key


def _listed(item: Mapping[str, Any], state: State | None) -> dict[str, Any]:
    request = item.get("request") or {}
    return {
        "request_id": str(item["request_id"]),
        "state": state.value if state else None,
        "requester": request.get("requester"),
        "team": request.get("team"),
        "instance_type": request.get("instance_type"),
        "instance_count": request.get("instance_count"),
        "earliest_start": request.get("earliest_start"),
        "duration_hours": request.get("duration_hours"),
        "dry_run": bool(request.get("dry_run", False)),
        "created_at": iso_z(parse_utc(str(item["written_at"]))),
        "links": links(str(item["request_id"])),
    }


def list_reservations(
    ports: Ports,
    *,
    status: State | None = None,
    team: str | None = None,
    limit: int = 20,
    next_token: str | None = None,
    viewer: Viewer | None = None,
) -> dict[str, Any]:
    """The reservations, newest first, optionally only those whose current state is ``status`` and those
    charged to ``team``; only those ``viewer`` may see (:class:`~capacity.logic.governance.policy.Viewer`;
    None: an internal read, unscoped).

    Args:
        status: keep only reservations currently in this state (their latest ledger state).
        team: keep only reservations charged to this team (the request's ``team``, set at the door).
        limit: at most this many per page (1..100).
        next_token: from the previous page; opaque.

    Returns:
        ``{"reservations": [{"request_id", "state", "requester", "team", "instance_type", "instance_count",
        "earliest_start", "duration_hours", "dry_run", "created_at", "links"}], "next_token"}``;
        ``next_token`` is None after the last page. With a filter a page may hold fewer than ``limit``
        reservations (at most ``10 * limit`` are examined per call) while ``next_token`` is still set.

    Raises:
        InvalidRequest: ``limit`` out of range or ``next_token`` not issued by this API.
        NotPermitted: ``team`` names a team ``viewer`` may not see.
    """
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidRequest([FieldError("limit", f"must be between 1 and {MAX_LIST_LIMIT}")])
    if viewer is not None:
        viewer.require_team(team)
    start: dict[str, Any] | None = _decode_token(next_token) if next_token else None
    found: list[dict[str, Any]] = []
    examined = 0
    while True:
        items, last = ports.ledger.list_requests(limit=limit, start_key=start)
        current = ports.ledger.current_states([str(item["request_id"]) for item in items])
        for index, item in enumerate(items):
            examined += 1
            state = current.get(str(item["request_id"]))
            request = item.get("request") or {}
            charged = request.get("team")
            shown = viewer is None or viewer.sees(team=charged, requester=request.get("requester"))
            if shown and (status is None or state is status) and (team is None or charged == team):
                found.append(_listed(item, state))
            more = index < len(items) - 1 or last is not None
            if more and (len(found) >= limit or examined >= limit * _SCAN_FACTOR):
                return {"reservations": found, "next_token": _encode_token(item)}
        if last is None:
            return {"reservations": found, "next_token": None}
        start = last


def validation_problems(errors: Sequence[Mapping[str, Any]]) -> list[FieldError]:
    """Powertools' ``RequestValidationError.errors()`` as friendly field errors
    (:func:`capacity.validation.field_problems`: the same wording as every other door)."""
    return field_problems(errors)
