"""Buy exactly once: the one skeleton of every purchase (a training plan, a capacity block).

Over 400 lines: the exactly-once skeleton and its after-purchase step are one protocol.

Neither ``CreateTrainingPlan`` nor ``PurchaseCapacityBlock`` takes a client token, neither purchase can be
cancelled, and both are paid upfront (AWS_FACTS.md). So a purchase is a ledger protocol around one AWS call,
the same for every platform (each platform is a :class:`Buyer`):

1. ``PURCHASE`` recorded: nothing is bought (a retried step, a duplicate execution).
2. ``PURCHASE_INTENT`` is put (conditionally) before AWS is called, naming its ``owner``: the Step Functions
   execution. An intent another execution owns means that execution buys: this one does not
   (:class:`~capacity.errors.PurchaseInProgress`).
3. An intent this execution wrote on an earlier attempt (a killed Lambda, a timeout that may have committed):
   the earlier attempt may have bought, so the purchase is looked up first (the training plan's
   deterministic name, the capacity block's request-id tag) and adopted. A purchase call that was made
   (``PURCHASE_CALL``) and is not visible yet is waited for, for :data:`CONSISTENCY_WINDOW`, unless the
   platform's call is itself unique (a training plan name can only be bought once): EC2's ``Describe*``
   calls are eventually consistent, and a second block would be paid twice.
4. The call, recorded just before it is made (``PURCHASE_CALL#<time>`` with the offering passed: a
   capacity reservation does not carry its fee, so what a found block cost is the offering of the last call);
   an expired offering is searched once more, in the same region, for a replacement within the rules
   (:func:`capacity.ranking.replacement`, with the team's approval threshold when it is lower than the
   request's: :func:`~capacity.logic.governance.policy.as_admitted`). ``PURCHASE`` is recorded from what AWS
   answered; then the platform's after-purchase step: the release schedule, ``PURCHASED`` with the money,
   ``ReservationPurchased`` and the message.

:func:`reconcile` is the same lookup for the paths that end a reservation (a failure, a cancel, a release):
whatever was bought behind an intent is recorded, with its release schedule, before anything else is decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple, Protocol

from capacity import money_metrics
from capacity.contracts.purchase import PurchaseInput, PurchaseOutput, TrainingPlanOutput, purchase_output
from capacity.errors import OfferingExpired, PurchaseInProgress, PurchaseUnconfirmed
from capacity.events import CapacityBlockPurchasedDetail, TrainingPlanPurchasedDetail
from capacity.lifecycle import PURCHASE_KEY, Event
from capacity.logic.continuity.attempts import attempt_calls, hold_key, intent_key, live_attempt
from capacity.logic.governance.policy import as_admitted, purchase_check, settle_spend
from capacity.logic.steps.common import (
    post,
    require_not_final,
    require_within_budget,
    states,
    stop_if_released,
)
from capacity.naming import release_schedule_name
from capacity.offerings import OfferingSummary
from capacity.ports import Ports
from capacity.pricing import format_usd
from capacity.purchases import PurchaseKind, parse_purchase, parse_reserved
from capacity.record_kinds import PURCHASE, PURCHASE_CALL
from capacity.records import State
from capacity.request import ReservationRequest
from capacity.resources import SlackMessage
from capacity.timeutil import iso_ms, iso_z, parse_utc

RELEASE_REASON = "reservation-end"
"""``ReleaseRequested`` reason of the schedule put when a reservation is bought (or launched on demand)."""
CONSISTENCY_WINDOW = timedelta(minutes=10)
"""How long a purchase call that may have committed is looked for before it is taken as not made."""


@dataclass(frozen=True)
class Bought:
    """What a purchase produced, as AWS describes it.

    Attributes:
        names: the reservation in its platform's own names, as the ``PURCHASE`` item records them
            (:class:`~capacity.purchases.TrainingPlanPurchase`'s ``training_plan_arn``/``training_plan_name``,
            :class:`~capacity.purchases.CapacityBlockPurchase`'s ``capacity_reservation_arn``,
            ``capacity_reservation_id``, ``availability_zone``).
        start_time, end_time: UTC; None when AWS did not say (the offering's are used).
        upfront_fee_usd: the fee AWS reports, None when it did not (the offering's is used).
        offering: the offering bought (the chosen one, or a fresh search's replacement).
        brought: someone else bought it (issue 17): nothing is paid by this request.
    """

    names: Mapping[str, str]
    start_time: datetime | None
    end_time: datetime | None
    upfront_fee_usd: Decimal | None
    offering: OfferingSummary
    brought: bool = False


class Purchased(NamedTuple):
    """One platform's part of the after-purchase step: ``release_at`` (UTC), the ``PURCHASED`` ``detail``
    (the platform's names) and the Slack ``message``."""

    release_at: datetime
    detail: Mapping[str, Any]
    message: SlackMessage


class Buyer(Protocol):
    """One platform's part of a purchase (training plans: :mod:`capacity.logic.sagemaker.training_plan`;
    capacity blocks: :mod:`capacity.logic.ec2.capacity_block`)."""

    platform: str
    kind: PurchaseKind
    """The kind of ``PURCHASE`` it records (``training-plan``, ``capacity-block``:
    :mod:`capacity.purchases`)."""
    what: str
    """What is bought, for messages (``training plan``, ``capacity block``)."""
    unique_call: bool
    """True when AWS itself refuses a second purchase for the request (a deterministic plan name)."""

    def preflight(self, request: ReservationRequest, ports: Ports, region: str) -> None:
        """Checks that must hold before money is spent (raise to refuse)."""
        ...

    def find(
        self, request: ReservationRequest, ports: Ports, region: str, offering: OfferingSummary
    ) -> Bought | None:
        """The purchase already made for the request in ``region``, or None (``offering``: the last one
        bought).

        Raises:
            NameCollision: what was found belongs to another request.
        """
        ...

    def buy(
        self, request: ReservationRequest, ports: Ports, region: str, offering: OfferingSummary
    ) -> Bought:
        """The AWS purchase call, once (an adopt on the platform's own collision answer is allowed).

        Raises:
            OfferingExpired: the offering id is no longer valid.
        """
        ...

    def research(
        self, request: ReservationRequest, ports: Ports, region: str, stale: OfferingSummary
    ) -> OfferingSummary | None:
        """One fresh search like ``stale``'s; the replacement the rules allow, or None."""
        ...

    def names(self, arn: str, name: str, zone: str | None) -> dict[str, str]:
        """The reservation ``arn`` (AWS's name or id ``name``, its zone if it has one) in the ``PURCHASE``
        item's words (:attr:`Bought.names`)."""
        ...

    def purchased(self, request: ReservationRequest, output: PurchaseOutput, ports: Ports) -> Purchased:
        """What the after-purchase step (:func:`after_purchase`) records for this platform: when to release,
        the ``PURCHASED`` detail and the message (and any upsert the platform needs first, idempotent).

        Raises:
            TypeError: ``output`` is the other platform's.
        """
        ...


def buy_once(step: PurchaseInput, request: ReservationRequest, ports: Ports, buyer: Buyer) -> PurchaseOutput:
    """Buy (or adopt) ``step.offering`` for ``request``, exactly once (see the module docstring).

    Raises:
        ReservationCancelled: the reservation is final before anything was bought, or was cancelled while
            it was bought (the purchase is recorded and its release requested again).
        BudgetExceeded: the offering costs more than ``max_upfront_fee_usd``.
        TeamLimitExceeded: the team's monthly budget, the account cap or the team's quota would be exceeded
            (:func:`~capacity.logic.governance.policy.reserve_spend`); nothing was bought.
        PurchaseInProgress: another execution owns the purchase (this one must not buy).
        PurchaseUnconfirmed: an earlier purchase call may have committed and is not visible yet (retryable).
        whatever the buyer raises (``OfferingExpired``, ``QuotaExceeded``, ``PurchaseFailed``,
        ``RetryableAwsError``...).
    """
    ledger = ports.ledger
    history = ports.ledger.history(request.id)
    # Whatever an earlier attempt bought is recorded first, even if the reservation ended meanwhile.
    existing = reconcile(request, ports, buyer, fallback=step.offering)
    if existing is None:
        attempt = live_attempt(ports, request.id)  # > 0 after a look's offering was taken (keep looking)
        intent = ledger.get(request.id, intent_key(attempt))
        if intent is not None:
            _refuse_another_owner(request, step, intent, ports)
            if not buyer.unique_call:
                _wait_for_an_earlier_call(request, ports, attempt)
        require_not_final(history, request.id)
        buyer.preflight(request, ports, step.offering.region)
        require_within_budget(request, step.offering)
        # The team's month, the account's and the quota, atomically, right before buying (issue 16).
        purchase_check(request, step.offering.upfront_fee_usd, ports, key=hold_key(request.id, attempt))
        created, intent = ledger.put_once(
            request.id,
            intent_key(attempt),
            {
                "actor": ports.actor,
                "owner": step.execution or "",
                "platform": buyer.platform,
                "region": step.offering.region,
                "offering": step.offering.model_dump(mode="json"),
            },
        )
        if not created:
            _refuse_another_owner(request, step, intent, ports)
        region = str(intent.get("region", step.offering.region))
        bought = _buy(request, ports, buyer, region, step.offering, attempt=attempt)
        existing = record_purchase(request, ports, buyer, region, bought, chosen=step.offering)
        fee = Decimal(str(existing["upfront_fee_usd"]))
        settle_spend(ports, key=hold_key(request.id, attempt), amount_usd=fee)
        money_metrics.committed(request.team, fee)
    output = after_purchase(buyer, request, existing, ports, first=State.PURCHASED not in states(history))
    stop_if_released(ports, request.id, "going on after the purchase")  # a cancel that came meanwhile
    return output


def _refuse_another_owner(
    request: ReservationRequest, step: PurchaseInput, intent: dict[str, Any], ports: Ports
) -> None:
    """Raise :class:`PurchaseInProgress` when another execution wrote the intent (unless that execution was
    stopped and this one resumed the request: :meth:`~capacity.ledger.Ledger.owner`)."""
    owner = str(intent.get("owner") or "")
    if (
        owner
        and step.execution
        and owner != step.execution
        and ports.ledger.owner(request.id) == step.execution
    ):
        return  # the writer was stopped and this execution resumed the request: it buys
    refuse_another_owner(f"the purchase for {request.id}", step.execution, intent)


def refuse_another_owner(what: str, execution: str | None, intent: dict[str, Any]) -> None:
    """The intent rule of every purchase and extension: only the execution that wrote an intent buys.

    Raises:
        PurchaseInProgress: ``intent``'s ``owner`` is another execution than ``execution``.
    """
    owner = str(intent.get("owner") or "")
    if owner and execution and owner != execution:
        raise PurchaseInProgress(
            f"{what} belongs to execution {owner}; this execution ({execution}) does not buy"
        )


def _buy(
    request: ReservationRequest,
    ports: Ports,
    buyer: Buyer,
    region: str,
    offering: OfferingSummary,
    *,
    attempt: int,
) -> Bought:
    """The purchase call for ``offering``, or once for a fresh search's replacement when it expired."""
    try:
        return _call(request, ports, buyer, region, offering, attempt=attempt)
    except OfferingExpired as exc:
        # Judged by the threshold the choice was judged by: the team's when it is lower than the request's.
        fresh = buyer.research(as_admitted(request, ports), ports, region, offering)
        if fresh is None:
            raise OfferingExpired(
                f"{buyer.what} offering {offering.offering_id} expired and a fresh search in {region} "
                f"found no {request.instance_count} x {request.instance_type} offering for "
                f"{request.duration_hours} h within the budget {format_usd(request.max_upfront_fee_usd)}; "
                "nothing was bought"
            ) from exc
        # The replacement may cost more.
        purchase_check(request, fresh.upfront_fee_usd, ports, key=hold_key(request.id, attempt))
        return _call(request, ports, buyer, region, fresh, attempt=attempt)


def _call(
    request: ReservationRequest,
    ports: Ports,
    buyer: Buyer,
    region: str,
    offering: OfferingSummary,
    *,
    attempt: int,
) -> Bought:
    """Record the money in flight (:attr:`~capacity.lifecycle.Event.MONEY_CALL`: refused once the reservation
    has an outcome or its release began, so no purchase starts after a cancel; the release waits until it is
    reconciled) and the call (``PURCHASE_CALL#<time>`` with its offering and attempt), then make it.

    Raises:
        ReservationCancelled: the reservation was cancelled, rejected or failed, or its release began:
            nothing is bought.
    """
    ports.ledger.record(request.id, Event.MONEY_CALL, actor=ports.actor, key=PURCHASE_KEY)
    ports.ledger.put_once(
        request.id,
        f"{PURCHASE_CALL}#{iso_ms(ports.clock())}",
        {
            "actor": ports.actor,
            "region": region,
            "offering": offering.model_dump(mode="json"),
            "attempt": attempt,
        },
    )
    return buyer.buy(request, ports, region, offering)


def _last_offering(request: ReservationRequest, ports: Ports, attempt: int) -> OfferingSummary | None:
    """The offering of attempt ``attempt``'s last purchase call, else of its intent (None without either)."""
    calls = [call for call in attempt_calls(ports, request.id, attempt) if call.get("offering")]
    if calls:
        return OfferingSummary.model_validate(calls[-1]["offering"])
    intent = ports.ledger.get(request.id, intent_key(attempt)) or {}
    return OfferingSummary.model_validate(intent["offering"]) if intent.get("offering") else None


def _wait_for_an_earlier_call(request: ReservationRequest, ports: Ports, attempt: int) -> None:
    """Refuse to call again while an earlier call of this attempt, not visible yet, may still show up.

    Raises:
        PurchaseUnconfirmed: a purchase call was made less than :data:`CONSISTENCY_WINDOW` ago.
    """
    calls = attempt_calls(ports, request.id, attempt)
    wait_for_an_earlier_call(calls, ports, f"the purchase call for {request.id}")


def wait_for_an_earlier_call(calls: list[dict[str, Any]], ports: Ports, what: str) -> None:
    """The consistency rule of every purchase and extension: a call recorded (``sk`` ending
    ``#<time>``) less than :data:`CONSISTENCY_WINDOW` ago may have committed unseen; do not call again.

    Raises:
        PurchaseUnconfirmed: the last of ``calls`` is too recent.
    """
    if not calls:
        return
    last = parse_utc(str(calls[-1]["sk"]).rsplit("#", 1)[1])
    if ports.clock() < last + CONSISTENCY_WINDOW:
        raise PurchaseUnconfirmed(
            f"{what} made at {iso_z(last)} may have committed and is not visible yet; looking again before "
            f"buying (until {iso_z(last + CONSISTENCY_WINDOW)})"
        )


def record_purchase(
    request: ReservationRequest,
    ports: Ports,
    buyer: Buyer,
    region: str,
    bought: Bought,
    *,
    chosen: OfferingSummary,
) -> dict[str, Any]:
    """Put the ``PURCHASE`` item (once) from what AWS answered, in the platform's own names
    (:class:`~capacity.purchases.TrainingPlanPurchase`, :class:`~capacity.purchases.CapacityBlockPurchase`);
    returns the item as stored."""
    offering = bought.offering
    fee = bought.upfront_fee_usd if bought.upfront_fee_usd is not None else offering.upfront_fee_usd
    record = parse_purchase(
        {
            "actor": ports.actor,
            "kind": buyer.kind,
            **bought.names,
            "region": region,
            "start_time": bought.start_time or offering.start_time,
            "end_time": bought.end_time or offering.end_time,
            "upfront_fee_usd": fee,
            "offering_id": offering.offering_id,
            "instance_type": request.instance_type,
            "instance_count": request.instance_count,
            "re_searched": offering.offering_id != chosen.offering_id,
            "brought": bought.brought,
        }
    )
    _, item = ports.ledger.put_once(request.id, PURCHASE, record.to_item())
    return item


def reconcile(
    request: ReservationRequest, ports: Ports, buyer: Buyer, *, fallback: OfferingSummary | None = None
) -> dict[str, Any] | None:
    """What was bought for ``request``, recorded: the ``PURCHASE`` item, or the purchase an intent led to.

    With an intent and no ``PURCHASE``, AWS is asked (the buyer's lookup); a purchase found is recorded
    (``PURCHASE``, then the after-purchase step: release schedule, ``PURCHASED`` with the money, message).
    ``fallback`` is the offering to record when the ledger names none (an intent written before intents
    recorded their offering).

    Returns:
        The ``PURCHASE`` item, or None when nothing was bought.

    Raises:
        RetryableAwsError: the lookup could not be made (the caller retries: money may be behind it).
    """
    ledger = ports.ledger
    item = ledger.get(request.id, PURCHASE)
    if item is not None:
        if PURCHASE_KEY in ledger.snapshot(request.id).in_flight:  # its money is not recorded yet
            history = ledger.history(request.id)
            after_purchase(buyer, request, item, ports, first=State.PURCHASED not in states(history))
        return item
    attempt = live_attempt(ports, request.id)  # earlier attempts were reconciled when they missed
    intent = ledger.get(request.id, intent_key(attempt))
    if intent is None:
        return None
    region = str(intent["region"])
    last = _last_offering(request, ports, attempt) or fallback
    if last is None:
        return None
    bought = buyer.find(request, ports, region, last)
    if bought is None:
        return None
    chosen = OfferingSummary.model_validate(intent["offering"]) if intent.get("offering") else last
    item = record_purchase(request, ports, buyer, region, bought, chosen=chosen)
    history = ledger.history(request.id)
    after_purchase(buyer, request, item, ports, first=State.PURCHASED not in states(history))
    return item


def after_purchase(
    buyer: Buyer, request: ReservationRequest, item: dict[str, Any], ports: Ports, *, first: bool
) -> PurchaseOutput:
    """The after-purchase step of every platform (idempotent): the one-time release schedule at the
    buyer's ``release_at`` (UTC; EventBridge Scheduler, so no later crash can leak what bills),
    ``ReservationPurchased`` when ``first``, ``PURCHASED`` once with the money (``upfront_fee_usd``) and the
    buyer's ``detail`` (the platform's names) plus the window, offering and ``release_at``, and the buyer's
    ``message`` posted by the call that recorded it (:meth:`Buyer.purchased`).

    Returns:
        The :data:`~capacity.contracts.purchase.PurchaseOutput` of ``item``.

    Raises:
        ReservationCancelled: ``item`` is a brought reservation (nothing paid) and the request already has
            its outcome (cancelled, rejected or failed): ``PURCHASED`` is not written after it.
    """
    output = purchase_output(parse_reserved(item))
    release_at, detail, message = buyer.purchased(request, output, ports)
    ports.scheduler.schedule_release(
        name=release_schedule_name(request.id), at=release_at, request_id=request.id, reason=RELEASE_REASON
    )
    if first:
        event = (
            TrainingPlanPurchasedDetail(request_id=request.id, **output.model_dump())
            if isinstance(output, TrainingPlanOutput)
            else CapacityBlockPurchasedDetail(request_id=request.id, **output.model_dump())
        )
        ports.events.put("ReservationPurchased", event, resources=[output.arn])
    written = ports.ledger.record(
        request.id,
        Event.PURCHASE,
        actor=ports.actor,
        detail={
            **detail,
            "region": output.region,
            "start_time": iso_z(output.start_time),
            "end_time": iso_z(output.end_time),
            "offering_id": item.get("offering_id"),
            "re_searched": bool(item.get("re_searched")),
            "brought": bool(item.get("brought")),
            "release_at": iso_z(release_at),
        },
        money_usd=output.upfront_fee_usd,
    )
    if written is not None:
        post(ports, message)
    return output
