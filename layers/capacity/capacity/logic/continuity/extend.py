"""Extend a reservation in place (issue 17): a training plan (``ExtendTrainingPlan``) or a capacity block
(``PurchaseCapacityBlockExtension``), through ``POST /reservations/{id}/extensions`` and the
``ExtensionRequested`` event.

Over 400 lines: one exactly-once extension protocol (purchase, confirmation) shared by both platforms.

Neither purchase takes a client token, both are paid upfront and cannot be cancelled (AWS_FACTS.md,
"Extensions"), so an extension follows :mod:`capacity.logic.steps.buy_once`'s rules (its
:func:`~capacity.logic.steps.buy_once.refuse_another_owner` and
:func:`~capacity.logic.steps.buy_once.wait_for_an_earlier_call`), with its own ledger items, keyed by the
extension id (the offering id the person chose: the same choice delivered twice is one extension):

1. ``EXTENSION#<id>`` recorded: nothing is bought again.
2. ``EXTENSION_INTENT#<id>`` put (conditionally) before AWS is called, naming its owner execution, after
   the money rules (:func:`require_extension_allowed`).
3. With an intent already there (a killed Lambda, a timeout that may have committed), the extension history
   (``DescribeTrainingPlanExtensionHistory``, ``DescribeCapacityBlockExtensionHistory``) is looked up for
   the offerings of the calls made, and what is found is adopted; a call made less than
   :data:`~capacity.logic.steps.buy_once.CONSISTENCY_WINDOW` ago and not visible is waited for.
4. ``EXTENSION_CALL#<id>#<time>`` with the offering, then the call; a stale offering is searched once more
   (same duration) and its cheapest replacement bought if the rules allow it (not above the stale one's fee
   when it needed approval), after the history shows the stale one was not bought after all.

Confirmation (:func:`confirm_extension`): the extension is ``pending`` until AWS took the payment. Paid: the
release schedule moves to the new end, ``EXTENDED`` is recorded with the fee (``money_usd``) and the new end,
``ReservationExtended`` is put and Slack told. Failed: nothing moves (the old schedule stays), the
``EXTENSION_OUTCOME#<id>`` says so, ``ExtensionFailed`` is put and Slack told the reservation still ends
at the old end. When the workflow gives up, :func:`extension_not_done` reconciles and tells.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError
from pydantic import ConfigDict

from capacity import messages
from capacity.base import Model
from capacity.errors import (
    BudgetExceeded,
    CapacityUnavailable,
    ExtensionApprovalRequired,
    ExtensionPending,
    ExtensionRefused,
    FieldError,
    InvalidRequest,
    OfferingExpired,
    PurchaseFailed,
    ReservationCancelled,
    TeamLimitExceeded,
)
from capacity.events import ExtensionFailedDetail, ExtensionRequestedDetail, ReservationExtendedDetail
from capacity.lifecycle import Event, extension_key
from capacity.logic.governance import policy
from capacity.logic.steps.buy_once import (
    CONSISTENCY_WINDOW,
    RELEASE_REASON,
    refuse_another_owner,
    wait_for_an_earlier_call,
)
from capacity.logic.steps.common import (
    STOP_STATES,
    Purchase,
    load_purchase,
    load_request,
    post,
    require_purchase,
    states,
)
from capacity.logic.wings import Extender, wing
from capacity.naming import release_schedule_name
from capacity.offerings import ExtensionOffering
from capacity.planner import needs_approval
from capacity.ports import Ports
from capacity.pricing import format_usd, on_demand_equivalent, on_demand_usd_per_hour
from capacity.record_kinds import (
    EXTENSION,
    EXTENSION_APPROVAL,
    EXTENSION_CALL,
    EXTENSION_DECISION,
    EXTENSION_INTENT,
    EXTENSION_OUTCOME,
    SUCCESSOR,
)
from capacity.records import State
from capacity.request import ReservationRequest
from capacity.resources import Extension
from capacity.timeutil import iso_ms, iso_z, parse_utc, short

MAX_EXTENSION_HOURS = 182 * 24
PAYMENT_WINDOW = timedelta(hours=12)
"""AWS fails an extension's payment not taken within 12 hours of the purchase (EC2 guide, "Extend Capacity
Blocks"; assumed for training plans too: AWS_FACTS.md, "Payments")."""
PAYMENT_DEADLINE_BEFORE_END = timedelta(minutes=35)
"""... or by 35 minutes before the reservation's current end, whichever comes first (same source)."""
PAYMENT_GRACE = timedelta(minutes=10)
"""How long after AWS's deadline a release still waits for a payment AWS reports pending (its reads lag)."""
PAYMENT_POLL = timedelta(minutes=10)
"""How often a release waiting for a payment in flight looks again."""


# ------------------------------------------------------------------------------------------ money rules


def purchase_commitment(purchase: Purchase) -> Decimal:
    """USD the ``PURCHASE`` commits the request to: a reservation's upfront fee; for capacity run on demand
    (or on spot, at its on-demand upper bound), which records no fee, its instances at the on-demand rate of
    their region from ``start_time`` to ``end_time`` (they run until then unless handed over earlier), the
    figure the request's budget judged it by. Without a known rate (never launched: an unpriced request is
    not tried on demand) nothing is counted."""
    if purchase.market == "reserved":
        return purchase.upfront_fee_usd
    rate = on_demand_usd_per_hour(purchase.region, purchase.instance_type)
    if rate is None:
        return purchase.upfront_fee_usd
    hours = Decimal(max(0, int((purchase.end_time - purchase.start_time).total_seconds()))) / 3600
    return purchase.upfront_fee_usd + on_demand_equivalent(
        rate, instance_count=purchase.instance_count, hours=hours
    )


def extension_spend(ports: Ports, request_id: str, *, excluding: str | None = None) -> Decimal:
    """USD committed for ``request_id``: the purchase (:func:`purchase_commitment`: on-demand capacity
    included) plus every extension paid or in flight (an intent without a failed outcome), but
    ``excluding``'s."""
    purchase = require_purchase(ports, request_id)
    total = purchase_commitment(purchase)
    failed = {
        str(item["sk"]).split("#", 1)[1]
        for item in ports.ledger.items(request_id, f"{EXTENSION_OUTCOME}#")
        if item.get("outcome") == "failed"
    }
    for intent in ports.ledger.items(request_id, f"{EXTENSION_INTENT}#"):
        extension_id = str(intent["sk"]).split("#", 1)[1]
        if extension_id == excluding or extension_id in failed:
            continue
        total += committed_fee(ports, request_id, extension_id, intent)
    return total


def committed_fee(ports: Ports, request_id: str, extension_id: str, intent: Mapping[str, Any]) -> Decimal:
    """USD the extension ``extension_id`` commits: the fee of the extension bought (``EXTENSION#<id>``)
    once recorded; before that the dearest of the offering chosen (``intent``) and those called
    (``EXTENSION_CALL``: a stale offering's replacement may cost more than the one chosen)."""
    bought = ports.ledger.get(request_id, f"{EXTENSION}#{extension_id}")
    if bought is not None:
        return Decimal(str(bought["upfront_fee_usd"]))
    offerings = [intent.get("offering") or {}] + [
        call["offering"] for call in _items(ports, request_id, EXTENSION_CALL, extension_id)
    ]
    return max(Decimal(str(offering.get("upfront_fee_usd") or "0")) for offering in offerings)


def hold_key(request_id: str, extension_id: str) -> str:
    """The team hold of an extension (:func:`~capacity.logic.governance.policy.reserve_spend`'s ``key``): its
    own, so the purchase's hold and each extension's are counted once each."""
    return f"{request_id}#EXTENSION#{extension_id}"


def approved_fee(ports: Ports, request_id: str, extension_id: str) -> Decimal | None:
    """The upfront fee (USD) a person approved for the extension ``extension_id`` (the offering they were
    asked about), or None when no approval is recorded (none asked, pending or rejected). Read from the
    ledger, never from the event: a forged ``ExtensionRequested`` cannot claim an approval."""
    decision = ports.ledger.get(request_id, f"{EXTENSION_DECISION}#{extension_id}")
    asked = ports.ledger.get(request_id, f"{EXTENSION_APPROVAL}#{extension_id}")
    if decision is None or not decision.get("approved") or asked is None:
        return None
    return Decimal(str(asked["offering"]["upfront_fee_usd"]))


def require_extension_allowed(
    request: ReservationRequest, ports: Ports, offering: ExtensionOffering, *, extension_id: str | None = None
) -> None:
    """The money rules of an extension, in one place: the purchase plus every extension stays within
    ``max_upfront_fee_usd``; the team's month (and the account's) must have room for the fee; an extension
    above the approval threshold (the lower of the request's and its team's) needs a person's approval of
    ``extension_id`` (:func:`approved_fee`: a fee up to the approved one). The purchase itself holds the fee
    atomically (:func:`~capacity.logic.governance.policy.reserve_spend`, in :func:`_call`); this check answers
    early with the reason.

    Raises:
        BudgetExceeded: the request's budget would be exceeded.
        TeamLimitExceeded: the team's monthly budget or the account cap has no room for the fee.
        ExtensionApprovalRequired: above the threshold and not approved (the doors ask for it).
        ExtensionRefused: its payment could land after the release begins
            (:func:`require_payment_before_release`).
    """
    require_payment_before_release(request, ports)
    admission = policy.admit(request, ports)
    if admission is not None:
        request = admission.request  # the effective approval threshold
        if admission.team is not None:
            left, sentence = policy.left_in_month(ports, admission.team, ports.clock())
            if offering.upfront_fee_usd > left:
                raise TeamLimitExceeded(
                    f"{sentence}; extending {request.id} costs "
                    f"{format_usd(offering.upfront_fee_usd)}: nothing was bought"
                )
    spent = extension_spend(ports, request.id, excluding=extension_id or offering.offering_id)
    if spent + offering.upfront_fee_usd > request.max_upfront_fee_usd:
        raise BudgetExceeded(
            f"extending {request.id} by {offering.duration_hours} h costs "
            f"{format_usd(offering.upfront_fee_usd)}: "
            f"with the {format_usd(spent)} already committed that is above the budget "
            f"{format_usd(request.max_upfront_fee_usd)}; nothing was bought"
        )
    threshold = request.approval_above_usd
    if threshold is None or not needs_approval(offering.upfront_fee_usd, threshold):
        return
    approved = approved_fee(ports, request.id, extension_id) if extension_id else None
    if approved is None or offering.upfront_fee_usd > approved:
        raise ExtensionApprovalRequired(
            f"the extension costs {format_usd(offering.upfront_fee_usd)}, above the approval threshold "
            f"{format_usd(threshold)}: an approver of the team must approve it "
            f"(POST /reservations/{request.id}/extensions/{extension_id or offering.offering_id}/approval or "
            "the Slack buttons); nothing was bought"
        )


# ------------------------------------------------------------------------------------------ money in flight


def payment_deadline(bought_at: datetime, end: datetime) -> datetime:
    """When AWS has taken or failed the payment of an extension bought at ``bought_at`` for a reservation
    ending at ``end`` (UTC): :data:`PAYMENT_WINDOW` after the purchase or :data:`PAYMENT_DEADLINE_BEFORE_END`
    before the end, whichever comes first."""
    return min(bought_at + PAYMENT_WINDOW, end - PAYMENT_DEADLINE_BEFORE_END)


def require_payment_before_release(request: ReservationRequest, ports: Ports) -> None:
    """An extension is asked only when its payment cannot land after the release must begin: AWS's
    deadline for a purchase now (:func:`payment_deadline`) is no later than the release (the current end
    less :func:`release_margin`). With a margin of 35 minutes or less that always holds (AWS decides by 35
    minutes before the end); with more (the default 60 minutes) an extension is asked at least 12 hours
    before the release. docs/api.md, "Money in flight".

    Raises:
        ExtensionRefused: too close to the release; the message names the latest moment to ask.
    """
    purchase = load_purchase(ports, request.id)
    if purchase is None:
        return
    end = current_end(ports, request.id, purchase)
    release = end - release_margin(request)
    now = ports.clock()
    if payment_deadline(now, end) <= release:
        return
    raise ExtensionRefused(
        f"{request.id} is released at {iso_z(release)}, and AWS may take the payment of an extension "
        f"asked now until {iso_z(payment_deadline(now, end))} (12 hours after the purchase or 35 minutes "
        f"before the end): an extension is asked by {iso_z(release - PAYMENT_WINDOW)} (12 hours before "
        "the release), so its fee never pays for hours after the release began; nothing was bought"
    )


def in_flight(ports: Ports, request_id: str) -> list[str]:
    """The extensions of ``request_id`` whose money is in flight: an ``EXTENSION_INTENT`` (the AWS call may
    have committed) without an ``EXTENSION_OUTCOME`` (neither paid nor failed is recorded)."""
    done = {
        str(item["sk"]).split("#", 1)[1] for item in ports.ledger.items(request_id, f"{EXTENSION_OUTCOME}#")
    }
    return [
        extension_id
        for item in ports.ledger.items(request_id, f"{EXTENSION_INTENT}#")
        if (extension_id := str(item["sk"]).split("#", 1)[1]) not in done
    ]


def settle_in_flight(ports: Ports, request_id: str) -> datetime | None:
    """Before a release deletes anything: reconcile every extension in flight with AWS (an extension call
    found in AWS's history is recorded, each bought one confirmed: paid records ``EXTENDED`` and moves the
    release schedule, failed records its outcome). Returns when to look again (UTC) while a payment is still
    pending before AWS's deadline (plus :data:`PAYMENT_GRACE`), else None: nothing is in flight any more,
    or AWS's deadline has passed (AWS fails it there).

    An intent with no call recorded is in flight only for
    :data:`~capacity.logic.steps.buy_once.CONSISTENCY_WINDOW` after it was written: the purchase step refuses
    to call AWS once the release has begun (:func:`extend_capacity`).

    Raises:
        RetryableAwsError: throttling/5xx after retries (the release's step retries).
    """
    purchase = load_purchase(ports, request_id)
    if purchase is None:
        return None
    now = ports.clock()
    wake: list[datetime] = []
    for extension_id in in_flight(ports, request_id):
        calls = _items(ports, request_id, EXTENSION_CALL, extension_id)
        bought = ports.ledger.get(request_id, f"{EXTENSION}#{extension_id}")
        if bought is None and calls:
            found = _find(
                wing(purchase.platform).extender,
                purchase,
                ports,
                {str(c["offering"]["offering_id"]) for c in calls},
            )
            if found is not None:
                bought = _record(ports, request_id, extension_id, found)
        if bought is None:
            intent = ports.ledger.get(request_id, f"{EXTENSION_INTENT}#{extension_id}") or {}
            since = parse_utc(str(calls[0]["sk"]).split("#", 2)[2]) if calls else _written(intent, now)
            if now < since + CONSISTENCY_WINDOW:
                wake.append(min(now + PAYMENT_POLL, since + CONSISTENCY_WINDOW))
            else:  # no call, or none AWS shows after its consistency window: nothing was bought
                _nothing_bought(ports, request_id, extension_id)
            continue
        try:
            confirm_extension(request_id, extension_id, ports)
        except ExtensionPending:
            bought_at = parse_utc(str(calls[0]["sk"]).split("#", 2)[2]) if calls else now
            deadline = payment_deadline(bought_at, current_end(ports, request_id, purchase)) + PAYMENT_GRACE
            if now < deadline:
                wake.append(min(now + PAYMENT_POLL, deadline))
            else:  # AWS fails it by its deadline: the release goes on (a fee taken later is still recorded)
                _nothing_bought(ports, request_id, extension_id)
    return min(wake) if wake else None


def _nothing_bought(ports: Ports, request_id: str, extension_id: str) -> None:
    """Extension ``extension_id`` is reconciled and bought nothing (or AWS's payment deadline passed): its
    money is no longer in flight (:attr:`~capacity.lifecycle.Event.MONEY_SETTLED`; a no-op when it was
    not)."""
    ports.ledger.record(request_id, Event.MONEY_SETTLED, actor=ports.actor, key=extension_key(extension_id))


def _written(item: Mapping[str, Any], default: datetime) -> datetime:
    at = item.get("written_at")
    return parse_utc(str(at)) if at else default


def fees_in_flight(ports: Ports, request_id: str) -> list[tuple[str, Decimal]]:
    """``(extension id, upfront fee USD)`` of every extension in flight (:func:`in_flight`): what a cancel's
    confirmation names besides the reservation's own fee."""
    out: list[tuple[str, Decimal]] = []
    for extension_id in in_flight(ports, request_id):
        intent = ports.ledger.get(request_id, f"{EXTENSION_INTENT}#{extension_id}") or {}
        out.append((extension_id, committed_fee(ports, request_id, extension_id, intent)))
    return out


# ------------------------------------------------------------------------------------------ dry run


def current_end(ports: Ports, request_id: str, purchase: Purchase) -> datetime:
    """The reservation's end as the ledger knows it: the last ``EXTENDED``'s, else the purchase's (UTC)."""
    ends = [
        parse_utc(str(e.detail["end_time"]))
        for e in ports.ledger.history(request_id)
        if e.state is State.EXTENDED
    ]
    return max([purchase.end_time, *ends])


def extendable(ports: Ports, request_id: str) -> tuple[ReservationRequest, Purchase]:
    request = load_request(ports, request_id)
    purchase = require_purchase(ports, request_id)
    if purchase.market != "reserved":
        raise ExtensionRefused(f"{request_id} runs on demand: there is no reservation to extend")
    if purchase.brought:
        raise ExtensionRefused(
            f"{request_id} serves on a reservation it brought ({purchase.name}), bought "
            "outside the orchestrator: ask its owner to extend it; nothing was bought"
        )
    stopped = states(ports.ledger.history(request_id)) & STOP_STATES
    if stopped:
        raise ExtensionRefused(f"{request_id} is {sorted(stopped)[0].value}: it can no longer be extended")
    successor = ports.ledger.get(request_id, SUCCESSOR)
    if successor is not None:  # its budget went to the successor: the chain goes on there
        raise ExtensionRefused(
            f"{request_id} is rolling over to {successor.get('successor_id')} (serve_until): extend that "
            "reservation instead; nothing was bought"
        )
    return request, purchase


def _offering(purchase: Purchase, found: Extension) -> ExtensionOffering:
    rate = on_demand_usd_per_hour(purchase.region, purchase.instance_type)
    return ExtensionOffering(
        offering_id=found.offering_id,
        region=purchase.region,
        availability_zone=found.availability_zone,
        start_time=found.start_time,
        end_time=found.end_time,
        duration_hours=found.duration_hours,
        upfront_fee_usd=found.upfront_fee_usd,
        on_demand_equivalent_usd=(
            on_demand_equivalent(
                rate, instance_count=purchase.instance_count or 1, hours=Decimal(found.duration_hours)
            )
            if rate is not None
            else None
        ),
    )


def search_extensions(ports: Ports, request_id: str, hours: int) -> list[ExtensionOffering]:
    """The extension offerings of ``hours`` for the reservation (AWS's refusals become
    :class:`~capacity.errors.ExtensionRefused` with AWS's reason)."""
    request, purchase = extendable(ports, request_id)
    try:
        found = wing(request.platform).extender.offerings(purchase, ports, hours)
    except ClientError as exc:
        raise ExtensionRefused(f"{request_id} cannot be extended by {hours} h: {exc}") from exc
    return [_offering(purchase, item) for item in found]


# ------------------------------------------------------------------------------------------ purchase


class ExtendInput(Model):
    """The ``extend_capacity`` step: ``detail`` the ``ExtensionRequested`` event's; ``execution`` the
    Step Functions execution (the intent's owner)."""

    model_config = ConfigDict(extra="ignore")

    detail: ExtensionRequestedDetail
    execution: str | None = None


class ExtendOutput(Model):
    """What ``extend_capacity`` and ``confirm_extension`` answer."""

    request_id: str
    extension_id: str
    status: str
    """``bought`` (payment to confirm), ``paid``, ``failed`` or ``not-ours`` (another execution buys)."""
    end_time: str | None = None


def _items(ports: Ports, request_id: str, kind: str, extension_id: str) -> list[dict[str, Any]]:
    return ports.ledger.items(request_id, f"{kind}#{extension_id}#")


def _find(extender: Extender, purchase: Purchase, ports: Ports, offering_ids: set[str]) -> Extension | None:
    return next(
        (item for item in extender.history(purchase, ports) if item.offering_id in offering_ids), None
    )


def _record(ports: Ports, request_id: str, extension_id: str, bought: Extension) -> dict[str, Any]:
    _, item = ports.ledger.put_once(
        request_id,
        f"{EXTENSION}#{extension_id}",
        {
            "actor": ports.actor,
            "offering_id": bought.offering_id,
            "start_time": iso_z(bought.start_time),
            "end_time": iso_z(bought.end_time),
            "upfront_fee_usd": f"{bought.upfront_fee_usd:f}",
            "duration_hours": bought.duration_hours,
        },
    )
    return item


def extend_capacity(step: ExtendInput, ports: Ports) -> ExtendOutput:
    """Buy (or adopt) the extension of ``step.detail``, exactly once (module docstring).

    Raises:
        ReservationNotFound, ExtensionRefused, BudgetExceeded: refused before anything was bought.
        PurchaseInProgress: another execution owns this extension.
        PurchaseUnconfirmed: an earlier call may have bought and is not visible yet (retryable).
        OfferingExpired: stale, and a fresh search found nothing the rules allow.
        CapacityUnavailable, PurchaseFailed, RetryableAwsError: AWS refused or failed.
    """
    detail = step.detail
    request_id, extension_id = detail.request_id, detail.extension_id
    ledger = ports.ledger
    done = ledger.get(request_id, f"{EXTENSION}#{extension_id}")
    if done is not None:
        return ExtendOutput(request_id=request_id, extension_id=extension_id, status="bought")
    request = load_request(ports, request_id)
    purchase = require_purchase(ports, request_id)
    extender = wing(request.platform).extender
    what = f"the extension {extension_id} of {request_id}"
    intent = ledger.get(request_id, f"{EXTENSION_INTENT}#{extension_id}")
    if intent is not None:
        refuse_another_owner(what, step.execution, intent)
        calls = _items(ports, request_id, EXTENSION_CALL, extension_id)
        found = _find(extender, purchase, ports, {str(c["offering"]["offering_id"]) for c in calls})
        if found is not None:
            _record(ports, request_id, extension_id, found)
            return ExtendOutput(request_id=request_id, extension_id=extension_id, status="bought")
        wait_for_an_earlier_call(calls, ports, f"the extension call for {request_id}")
    else:
        extendable(ports, request_id)
        require_extension_allowed(request, ports, detail.offering, extension_id=extension_id)
        created, intent = ledger.put_once(
            request_id,
            f"{EXTENSION_INTENT}#{extension_id}",
            {
                "actor": ports.actor,
                "owner": step.execution or "",
                "requester": detail.requester,
                "offering": detail.offering.model_dump(mode="json"),
            },
        )
        if not created:
            refuse_another_owner(what, step.execution, intent)
    try:
        bought = _buy(request, purchase, ports, extender, extension_id, detail.offering)
    except (CapacityUnavailable, PurchaseFailed, OfferingExpired):
        # AWS refused and nothing was bought: the team's month gets the fee back
        policy.give_back(ports, hold_key(request_id, extension_id), money=True, quota=False)
        _nothing_bought(ports, request_id, extension_id)
        raise
    _record(ports, request_id, extension_id, bought)
    return ExtendOutput(request_id=request_id, extension_id=extension_id, status="bought")


def _call(  # noqa: PLR0917 - one call, every piece it records
    ports: Ports,
    purchase: Purchase,
    extender: Extender,
    request: ReservationRequest,
    extension_id: str,
    offering: ExtensionOffering,
) -> Extension:
    """Hold the fee in the team's month (atomic, idempotent per extension), record the call, make it; never
    once the release has begun (it deletes what the extension would pay for).

    Raises:
        ExtensionRefused: the reservation is releasing or ended (nothing was bought).
    """
    request_id = request.id
    try:  # money in flight from here: refused once the reservation has an outcome or its release began
        ports.ledger.record(request_id, Event.MONEY_CALL, actor=ports.actor, key=extension_key(extension_id))
    except ReservationCancelled as exc:
        raise ExtensionRefused(
            f"{exc}: the extension was not bought (it would pay for hours nothing serves)"
        ) from exc
    try:
        policy.reserve_spend(
            ports,
            key=hold_key(request_id, extension_id),
            team_name=request.team,
            amount_usd=offering.upfront_fee_usd,
            instance_type=request.instance_type,
            instance_count=0,  # an extension adds time, not instances: the quota is unchanged
        )
    except Exception:
        _nothing_bought(ports, request_id, extension_id)
        raise
    ports.ledger.put_once(
        request_id,
        f"{EXTENSION_CALL}#{extension_id}#{iso_ms(ports.clock())}",
        {"actor": ports.actor, "offering": offering.model_dump(mode="json")},
    )
    return extender.buy(purchase, ports, offering.offering_id)


def _buy(  # noqa: PLR0917
    request: ReservationRequest,
    purchase: Purchase,
    ports: Ports,
    extender: Extender,
    extension_id: str,
    offering: ExtensionOffering,
) -> Extension:
    """The call for ``offering``; when stale, the history first (a committed call refused on its retry looks
    stale), then one fresh search and its cheapest replacement within the rules."""
    try:
        return _call(ports, purchase, extender, request, extension_id, offering)
    except OfferingExpired as exc:
        found = _find(extender, purchase, ports, {offering.offering_id})
        if found is not None:
            return found
        fresh = sorted(  # the cheapest first, as a purchase's replacement (ranking.replacement)
            (
                item
                for item in search_extensions(ports, request.id, offering.duration_hours)
                if item.upfront_fee_usd
                <= max(offering.upfront_fee_usd, request.approval_above_usd or offering.upfront_fee_usd)
            ),
            key=lambda item: (item.upfront_fee_usd, item.offering_id),
        )
        if not fresh:
            raise OfferingExpired(
                f"{extender.what} extension offering {offering.offering_id} expired and a fresh search "
                f"found no "
                f"{offering.duration_hours} h extension within the rules; nothing was bought"
            ) from exc
        require_extension_allowed(request, ports, fresh[0], extension_id=extension_id)
        return _call(ports, purchase, extender, request, extension_id, fresh[0])


# ------------------------------------------------------------------------------------------ confirmation


def _margin(request: ReservationRequest, extender: Extender) -> timedelta:
    return max(timedelta(minutes=request.release_margin_minutes), extender.latest_release_before_end)


def release_margin(request: ReservationRequest) -> timedelta:
    """How long before its end the reservation of ``request`` is released: ``release_margin_minutes``, and
    for a capacity block at least 35 minutes (AWS reclaims its instances 30 minutes before the end)."""
    return _margin(request, wing(request.platform).extender)


def confirm_extension(request_id: str, extension_id: str, ports: Ports) -> ExtendOutput:
    """Once AWS took (or refused) the payment: record it (module docstring). Idempotent.

    Raises:
        ExtensionPending: the payment is still processing (retry later).
        ReservationNotFound: no such reservation.
        ExtensionRefused: nothing was bought for this extension.
    """
    ledger = ports.ledger
    request = load_request(ports, request_id)
    bought = ledger.get(request_id, f"{EXTENSION}#{extension_id}")
    if bought is None:
        raise ExtensionRefused(f"the extension {extension_id} of {request_id} was not bought")
    outcome = ledger.get(request_id, f"{EXTENSION_OUTCOME}#{extension_id}")
    if outcome is not None:
        return ExtendOutput(
            request_id=request_id,
            extension_id=extension_id,
            status=str(outcome["outcome"]),
            end_time=outcome.get("end_time"),
        )
    purchase = require_purchase(ports, request_id)
    extender = wing(request.platform).extender
    found = _find(extender, purchase, ports, {str(bought["offering_id"])})
    status = found.status if found is not None else "pending"
    if status == "pending":
        raise ExtensionPending(f"the payment of extension {extension_id} of {request_id} is still processing")
    old_end = current_end(ports, request_id, purchase)
    if status == "paid" and found is not None and State.RELEASING in states(ledger.history(request_id)):
        # Paid after the release began (it waits for payments in flight, so only past AWS's own deadline):
        # the fee is recorded with its outcome, never as EXTENDED after RELEASING, and a person is told.
        policy.settle_spend(ports, key=hold_key(request_id, extension_id), amount_usd=found.upfront_fee_usd)
        reason = (
            f"AWS took the payment of the extension ({format_usd(found.upfront_fee_usd)}) after the release "
            f"of {request_id} had begun: the fee is spent and nothing serves its hours"
        )
        post(ports, messages.extension_failed(request_id, reason))
        ledger.put_once(
            request_id,
            f"{EXTENSION_OUTCOME}#{extension_id}",
            {
                "outcome": "paid",
                "after_release": True,
                "upfront_fee_usd": f"{found.upfront_fee_usd:f}",
                "end_time": iso_z(old_end),
                "reason": reason,
                "actor": ports.actor,
            },
        )
        return ExtendOutput(
            request_id=request_id, extension_id=extension_id, status="paid", end_time=iso_z(old_end)
        )
    if status == "paid" and found is not None:
        new_end = max(old_end, found.end_time)
        release_at = new_end - _margin(request, extender)
        ports.scheduler.move_release(
            name=release_schedule_name(request_id),
            at=release_at,
            request_id=request_id,
            reason=RELEASE_REASON,
        )
        _record_extended(ports, request_id, extension_id, found, old_end, new_end, release_at)
        policy.settle_spend(ports, key=hold_key(request_id, extension_id), amount_usd=found.upfront_fee_usd)
        end = new_end
    else:
        reason = f"the payment of the extension was not taken; {request_id} still ends at {iso_z(old_end)}"
        ports.events.put(
            "ExtensionFailed",
            ExtensionFailedDetail(
                request_id=request_id, extension_id=extension_id, reason=reason, end_time=old_end
            ),
        )
        post(ports, messages.extension_failed(request_id, reason))
        policy.give_back(ports, hold_key(request_id, extension_id), money=True, quota=False)
        _nothing_bought(ports, request_id, extension_id)
        end = old_end
        status = "failed"
    ledger.put_once(
        request_id,
        f"{EXTENSION_OUTCOME}#{extension_id}",
        {"outcome": status, "end_time": iso_z(end), "actor": ports.actor},
    )
    return ExtendOutput(request_id=request_id, extension_id=extension_id, status=status, end_time=iso_z(end))


def _record_extended(  # noqa: PLR0917
    ports: Ports,
    request_id: str,
    extension_id: str,
    found: Extension,
    old_end: datetime,
    new_end: datetime,
    release_at: datetime,
) -> None:
    """``EXTENDED`` with the fee, once per extension; then the event and the message."""
    recorded = any(
        e.state is State.EXTENDED and e.detail.get("extension_id") == extension_id
        for e in ports.ledger.history(request_id)
    )
    if recorded:
        return
    ports.ledger.record(
        request_id,
        Event.EXTEND,
        key=extension_key(extension_id),
        actor=ports.actor,
        detail={
            "extension_id": extension_id,
            "offering_id": found.offering_id,
            "previous_end_time": iso_z(old_end),
            "end_time": iso_z(new_end),
            "release_at": iso_z(release_at),
        },
        money_usd=found.upfront_fee_usd,
    )
    ports.events.put(
        "ReservationExtended",
        ReservationExtendedDetail(
            request_id=request_id,
            extension_id=extension_id,
            offering_id=found.offering_id,
            end_time=new_end,
            upfront_fee_usd=found.upfront_fee_usd,
        ),
    )
    post(
        ports,
        messages.extended(
            request_id,
            hours=found.duration_hours,
            fee=found.upfront_fee_usd,
            old_end=short(old_end),
            new_end=short(new_end),
            release_at=short(release_at),
        ),
    )


def extension_not_done(event: Mapping[str, Any], ports: Ports) -> ExtendOutput:
    """The workflow's last step when buying or confirming an extension gave up (``NotExtended``): never
    silent, never money lost from the record.

    ``event``: ``{"detail": <the ExtensionRequested detail, as sent>, "error": {"Error", "Cause"}}``.

    - An outcome is recorded already: nothing more.
    - Bought (``EXTENSION#<id>``, or an intent whose call AWS's extension history shows: recorded now):
      confirmed once more (paid: ``EXTENDED`` and the release moved; refused: said so). Still processing:
      the requester is told it was bought and the release stays at the old end until it is confirmed
      (sending the same extension again confirms it).
    - Nothing bought: the fee held in the team's month is given back, ``EXTENSION_OUTCOME`` ``failed``,
      ``ExtensionFailed`` put and the requester told why (a refusal of an ``ExtensionRequested`` event is
      how its sender hears it).

    Raises:
        RetryableAwsError: throttling/5xx after retries (the state retries).
    """
    sent, failure = event.get("detail"), event.get("error")
    raw: Mapping[str, Any] = sent if isinstance(sent, Mapping) else {}
    error: Mapping[str, Any] = failure if isinstance(failure, Mapping) else {}
    request_id, extension_id = str(raw.get("request_id") or ""), str(raw.get("extension_id") or "")
    why = f"{error.get('Error') or 'an error'}: {_cause(error.get('Cause'))}"
    unknown = ExtendOutput(request_id=request_id, extension_id=extension_id, status="failed")
    request = ports.ledger.get_request(request_id) if request_id else None
    if request is None or not extension_id:
        post(
            ports,
            messages.extension_failed(request_id or "(no request_id)", f"the request was refused ({why})"),
        )
        return unknown
    ledger = ports.ledger
    if ledger.get(request_id, f"{EXTENSION_OUTCOME}#{extension_id}") is not None:
        return unknown
    purchase = load_purchase(ports, request_id)
    bought = ledger.get(request_id, f"{EXTENSION}#{extension_id}")
    calls = _items(ports, request_id, EXTENSION_CALL, extension_id)
    if bought is None and calls and purchase is not None:
        offered = {str(call["offering"]["offering_id"]) for call in calls}
        found = _find(wing(request.platform).extender, purchase, ports, offered)
        if found is not None:
            bought = _record(ports, request_id, extension_id, found)
    if bought is not None:
        try:
            return confirm_extension(request_id, extension_id, ports)
        except ExtensionPending:
            post(ports, messages.extension_unconfirmed(request_id, extension_id))
            return ExtendOutput(request_id=request_id, extension_id=extension_id, status="bought")
    end = current_end(ports, request_id, purchase) if purchase is not None else None
    reason = f"nothing was bought ({why})" + (f"; {request_id} still ends at {iso_z(end)}" if end else "")
    if ledger.get(request_id, f"{EXTENSION_INTENT}#{extension_id}") is not None:
        # Started and given up: the fee held in the team's month goes back, and the outcome is final (the
        # intent's owner is gone, so nothing buys this extension id again).
        policy.give_back(ports, hold_key(request_id, extension_id), money=True, quota=False)
        _nothing_bought(ports, request_id, extension_id)
        ledger.put_once(
            request_id,
            f"{EXTENSION_OUTCOME}#{extension_id}",
            {"outcome": "failed", "reason": reason, "actor": ports.actor}
            | ({"end_time": iso_z(end)} if end else {}),
        )
    ports.events.put(
        "ExtensionFailed",
        ExtensionFailedDetail(request_id=request_id, extension_id=extension_id, reason=reason, end_time=end),
    )
    post(ports, messages.extension_failed(request_id, reason))
    return unknown


def _cause(cause: object) -> str:
    """The message of a Step Functions error ``Cause`` (a Lambda's JSON ``errorMessage``, or the text)."""
    try:
        parsed = json.loads(str(cause))
    except ValueError:
        return str(cause or "no cause given")[:300]
    return str(parsed.get("errorMessage") if isinstance(parsed, dict) else parsed)[:300]


def extension_step(event: Mapping[str, Any], ports: Ports) -> dict[str, Any]:
    """The ``extend_capacity`` Lambda's kinds: ``purchase`` (:func:`extend_capacity`), ``confirm``
    (:func:`confirm_extension`) and ``failed`` (:func:`extension_not_done`).

    Raises:
        InvalidRequest: an unknown ``kind``; what the functions raise.
    """
    kind = event.get("kind")
    if kind == "purchase":
        return extend_capacity(ExtendInput.model_validate(event), ports).model_dump()
    if kind == "confirm":
        return confirm_extension(str(event["request_id"]), str(event["extension_id"]), ports).model_dump()
    if kind == "failed":
        return extension_not_done(event, ports).model_dump()
    raise InvalidRequest([FieldError("kind", "must be purchase, confirm or failed")])
