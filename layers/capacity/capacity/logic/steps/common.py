"""Helpers shared by the workflow steps: loading what the ledger holds, recording once, notifying.

Over 400 lines: the few rules every step shares (purchase, stop check, activation record) read together.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from capacity import TAG_REQUEST_ID, messages
from capacity.contracts.activation import ActivationInput, ActivationOutput
from capacity.contracts.common import backoff_seconds
from capacity.errors import (
    ActivationTimeout,
    BudgetExceeded,
    NameCollision,
    PlanFailed,
    ReservationCancelled,
    ReservationNotFound,
)
from capacity.events import ReleaseRequestedDetail, ReservationActiveDetail
from capacity.ledger import history_of
from capacity.lifecycle import Event
from capacity.offerings import OfferingSummary
from capacity.platforms import PlatformName
from capacity.ports import Ports
from capacity.pricing import format_usd
from capacity.purchases import (
    CapacityBlockPurchase,
    OnDemandInstancesPurchase,
    PurchaseRecord,
    TrainingPlanPurchase,
    parse_purchase,
)
from capacity.record_kinds import PURCHASE, PURCHASE_VOIDED, SLACK_ROOT, SLACK_THREAD, STATE_PREFIX
from capacity.records import FINAL_STATES, LedgerEntry, State
from capacity.request import ReservationRequest
from capacity.resources import SlackMessage
from capacity.timeutil import iso_z, parse_utc

logger = logging.getLogger(__name__)


def load_request(ports: Ports, request_id: str) -> ReservationRequest:
    """The recorded request.

    Raises:
        ReservationNotFound: nothing is recorded for ``request_id``.
    """
    request = ports.ledger.get_request(request_id)
    if request is None:
        raise ReservationNotFound(f"no reservation {request_id!r} is recorded")
    return request


class Purchase:
    """What was bought for a reservation, as the steps read it: the ``PURCHASE`` item's model (``record``: a
    :mod:`capacity.purchases` kind, in its platform's own names) and what every kind has, with the end moved
    by the extensions paid since (:func:`load_purchase`).
    """

    def __init__(self, item: Mapping[str, Any]) -> None:
        self.record: PurchaseRecord = parse_purchase(item)
        """The item's model: a training plan, a capacity block, an on-demand endpoint or instances."""
        record = self.record
        self.region = record.region
        self.start_time: datetime = record.start_time
        self.end_time: datetime = record.end_time
        """The end (UTC), moved by each extension in place paid since (:func:`load_purchase`)."""
        self.upfront_fee_usd: Decimal = record.upfront_fee_usd
        self.instance_type = record.instance_type
        self.instance_count = record.instance_count
        self.platform: str = record.platform
        self.market: str = record.market
        """``reserved`` (training plan, capacity block), ``on-demand`` or ``spot`` (on-demand first)."""
        self.extension_fees_usd = Decimal(0)
        """The fees of the extensions in place paid since (USD; :func:`load_purchase`)."""
        self.instance_ids = list(record.instance_ids) if isinstance(record, OnDemandInstancesPurchase) else []
        """The instances ``RunInstances`` answered for capacity run on demand (EC2), else empty."""
        self.written_at: datetime | None = (
            parse_utc(str(item["written_at"])) if item.get("written_at") else None
        )
        """When the item was recorded (UTC)."""
        self.brought = record.brought
        """True: someone else bought the reservation (issue 17); ``upfront_fee_usd`` is 0 for this request."""

    @property
    def arn(self) -> str:
        """The reservation's ARN (a training plan's, a capacity reservation's); empty on demand."""
        return self.record.arn

    @property
    def name(self) -> str:
        """What a person calls the reservation (a plan's name, a block's ``cr-...``); empty on demand."""
        return self.record.name

    def summary_names(self) -> dict[str, Any]:
        """What names it in a cost summary (:class:`~capacity.records.CostSummary`): its ``market`` and the
        plan's name or the block's id."""
        record = self.record
        if isinstance(record, TrainingPlanPurchase):
            return {"market": record.market, "training_plan_name": record.training_plan_name}
        if isinstance(record, CapacityBlockPurchase):
            return {"market": record.market, "capacity_reservation_id": record.capacity_reservation_id}
        return {"market": record.market}

    def capacity_block(self) -> CapacityBlockPurchase:
        """The capacity block bought.

        Raises:
            ReservationNotFound: what was bought is not a capacity block.
        """
        if not isinstance(self.record, CapacityBlockPurchase):
            raise ReservationNotFound(f"no capacity block purchase is recorded (a {self.record.kind})")
        return self.record

    def training_plan(self) -> TrainingPlanPurchase:
        """The training plan bought.

        Raises:
            ReservationNotFound: what was bought is not a training plan.
        """
        if not isinstance(self.record, TrainingPlanPurchase):
            raise ReservationNotFound(f"no training plan purchase is recorded (a {self.record.kind})")
        return self.record


def load_purchase(ports: Ports, request_id: str) -> Purchase | None:
    """The ``PURCHASE`` item of ``request_id``, or None when nothing was bought; its ``end_time`` is the end
    of the last paid extension in place (``EXTENDED``, issue 17) and ``extension_fees_usd`` their fees, so
    every rule about the end (no scale-out in the last hour, the cost summary) follows the extended end.
    Two small reads (the item, then the history only when there is a purchase), not the whole reservation:
    its ``REQUEST`` and usage items are the bulk of it."""
    item = ports.ledger.get(request_id, PURCHASE)
    if not item:
        return None
    return purchase_from([item, *ports.ledger.items(request_id, STATE_PREFIX)])


def purchase_from(items: Sequence[Mapping[str, Any]]) -> Purchase | None:
    """:func:`load_purchase` from the reservation's ledger items as one query read them (any order)."""
    item = next((item for item in items if item["sk"] == PURCHASE), None)
    if not item:
        return None
    purchase = Purchase(item)
    for entry in history_of(items):
        if entry.state is State.EXTENDED and entry.detail.get("end_time"):
            purchase.end_time = max(purchase.end_time, parse_utc(str(entry.detail["end_time"])))
            purchase.extension_fees_usd += entry.money_usd or Decimal(0)
    return purchase


def require_purchase(ports: Ports, request_id: str) -> Purchase:
    """The ``PURCHASE`` item.

    Raises:
        ReservationNotFound: no purchase is recorded for ``request_id``.
    """
    purchase = load_purchase(ports, request_id)
    if purchase is None:
        raise ReservationNotFound(f"no training plan purchase is recorded for {request_id!r}")
    return purchase


def states(history: list[LedgerEntry]) -> set[State]:
    """The set of states a history has passed through."""
    return {entry.state for entry in history}


STOP_STATES = FINAL_STATES | {State.RELEASING}
"""States after which nothing billable may be created for a reservation."""


def stop_if_released(ports: Ports, request_id: str, doing: str, *, release: bool = True) -> list[LedgerEntry]:
    """Check (strongly consistent ledger read) that the reservation may still create billable resources.

    Called before a create *and after it*: a cancel or a release that ran while the create was in flight
    (a throttling back-off, a slow call) may have finished before the resource existed, so it found nothing
    to delete. When a stop state (``RELEASING``, ``RELEASED``, ``CANCELLED``, ``REJECTED``, ``FAILED``) is
    recorded and ``release`` is set (and a ``PURCHASE`` is recorded), a new ``ReleaseRequested`` is put:
    the release is re-entrant, deletes what the first pass missed, and its ``RELEASED`` marker keeps one
    ``RELEASED`` entry. Found by the fault soak (docs/soak.md).

    Returns:
        The history read (oldest first), when no stop state is recorded.

    Raises:
        ReservationCancelled: a stop state is recorded (the message names it and ``doing``).
    """
    history = ports.ledger.history(request_id)
    stop = states(history) & STOP_STATES
    if not stop:
        return history
    if release and ports.ledger.get(request_id, PURCHASE) is not None:
        releasing = first_entry(history, State.RELEASING)
        reason = str(releasing.detail.get("reason") or "") if releasing else ""
        reason = reason or ("cancelled" if State.CANCELLED in stop else "failed")
        ports.events.put("ReleaseRequested", ReleaseRequestedDetail(request_id=request_id, reason=reason))
        logger.info("%s: %s is %s; release requested again", doing, request_id, sorted(s.value for s in stop))
    raise ReservationCancelled(
        f"reservation {request_id} is {', '.join(sorted(s.value for s in stop))}; not {doing}"
    )


UNCHARGED_STATUSES = frozenset({"Failed", "payment-failed", "failed"})
"""What AWS reports for a reservation it charged nothing for: a training plan whose creation ``Failed``, a
capacity block whose payment failed (``payment-failed``) or that ``failed``."""


def void_purchase(ports: Ports, request_id: str, status: str) -> None:
    """Record (``PURCHASE_VOIDED``, once) that the reservation bought for ``request_id`` charged nothing, when
    AWS reports it ``status`` in :data:`UNCHARGED_STATUSES`; the failure path then reverses the money."""
    if status not in UNCHARGED_STATUSES:
        return
    purchase = ports.ledger.get(request_id, PURCHASE)
    if purchase is None:
        return
    ports.ledger.put_once(
        request_id,
        PURCHASE_VOIDED,
        {"actor": ports.actor, "status": status, "upfront_fee_usd": str(purchase["upfront_fee_usd"])},
    )


PAYMENT_DEADLINE = timedelta(hours=12)
"""EC2 reports a failed payment "after up to 12 hours" (AWS_FACTS.md); SageMaker documents no bound, so the
same one is used for training plans."""
DEADLINE_AFTER_START = timedelta(hours=2)
"""A reservation not active two hours after its start time will not serve."""


@dataclasses.dataclass(frozen=True)
class Sighting:
    """What one activation poll of a reservation saw, in the words its platform's wing chose.

    ``status`` is the training plan spelling the state machine branches on (``Pending``, ``Scheduled``,
    ``Active``); ``state`` AWS's own (a training plan's ``Status``, a capacity reservation's ``State``);
    ``payment_state`` how to name the payment wait when the reservation is in it, else None; ``what``
    names it in errors (``training plan <name>``, ``capacity block <id>``); ``active_event`` builds
    ``ReservationActive`` in the platform's own names from the window (UTC), ``arn`` is its resource;
    ``start``/``end`` (UTC) are AWS's, None when it does not say (the purchase's are used then).
    ``scheduled_detail``/``active_detail`` are the identifiers of the ``SCHEDULED``/``ACTIVE`` ledger entries
    (the window is added); the message builders take the window (UTC).
    ``in_use_instance_count`` is a training plan's own usage count while ``Active`` (None for a capacity
    block).
    """

    status: str
    state: str
    payment_state: str | None
    what: str
    active_event: Callable[[datetime | None, datetime | None], ReservationActiveDetail]
    arn: str
    start: datetime | None
    end: datetime | None
    scheduled_detail: Mapping[str, Any]
    active_detail: Mapping[str, Any]
    scheduled_message: Callable[[datetime | None, datetime | None], SlackMessage]
    active_message: Callable[[datetime | None, datetime | None], SlackMessage]
    in_use_instance_count: int | None = None


def record_activation(
    ports: Ports, step: ActivationInput, sighting: Sighting, *, platform: PlatformName
) -> ActivationOutput:
    """Record what one activation poll saw (``sighting``), each state once, then hold a reservation that is
    not ``Active`` to its deadlines (:func:`check_activation_deadlines`).

    The window is AWS's when it says, else the purchase's. ``Scheduled`` or ``Active`` records
    ``SCHEDULED`` (the sighting's detail plus the window and ``observed``: whether the poll saw
    ``Scheduled``; its message is posted only then); ``Active`` puts ``ReservationActive`` (the sighting's
    ``active_event`` of the window, UTC; resource ``arn``) unless ``ACTIVE`` is in the history, then records
    ``ACTIVE`` and posts its message once.

    Returns:
        ``status``, ``attempt + 1``, ``next_wait_seconds`` = 60 * 2**attempt (at most 900) and ``platform``.

    Raises:
        ReservationCancelled: the reservation is releasing or final (nothing is recorded).
        PlanFailed: the payment is :data:`PAYMENT_DEADLINE` late.
        ActivationTimeout: not active :data:`DEADLINE_AFTER_START` after its start.
    """
    request_id, status = step.request_id, sighting.status
    history = stop_if_released(
        ports, request_id, f"recording {sighting.what} status {sighting.state}", release=False
    )
    purchase = load_purchase(ports, request_id)
    start = sighting.start or (purchase.start_time if purchase else None)
    end = sighting.end or (purchase.end_time if purchase else None)
    window = {"start_time": iso_z(start) if start else None, "end_time": iso_z(end) if end else None}
    seen = {entry.state for entry in history}
    if status in ("Scheduled", "Active") and State.SCHEDULED not in seen:
        written = ports.ledger.record(
            request_id,
            Event.SCHEDULE,
            actor=ports.actor,
            detail={**sighting.scheduled_detail, **window, "observed": status == "Scheduled"},
        )
        if written is not None and status == "Scheduled":
            post(ports, sighting.scheduled_message(start, end))
    if status == "Active":
        if State.ACTIVE not in seen:
            ports.events.put("ReservationActive", sighting.active_event(start, end), resources=[sighting.arn])
        detail = {**sighting.active_detail, **window}
        written = ports.ledger.record(request_id, Event.ACTIVATE, actor=ports.actor, detail=detail)
        if written is not None:
            post(ports, sighting.active_message(start, end))
    else:
        check_activation_deadlines(
            history,
            ports.clock(),
            what=sighting.what,
            state=sighting.state,
            payment_state=sighting.payment_state,
            start=start,
        )
    return ActivationOutput(
        status=status,
        attempt=step.attempt + 1,
        next_wait_seconds=backoff_seconds(step.attempt, base=60, cap=900),
        platform=platform,
    )


def check_activation_deadlines(
    history: list[LedgerEntry],
    now: datetime,
    *,
    what: str,
    state: str,
    payment_state: str | None,
    start: datetime | None,
) -> None:
    """Fail a reservation that is not active yet when it should be.

    Args:
        what: ``training plan <name>`` or ``capacity block <id>``, for the error.
        state: its current state as AWS spells it.
        payment_state: how to name the payment wait when the reservation waits for it, else None.
        start: its start time (UTC), None when unknown.

    Raises:
        PlanFailed: still waiting for the payment :data:`PAYMENT_DEADLINE` after ``PURCHASED``.
        ActivationTimeout: not active :data:`DEADLINE_AFTER_START` after ``start``.
    """
    purchased = first_entry(history, State.PURCHASED)
    if payment_state is not None and purchased is not None and now > purchased.at + PAYMENT_DEADLINE:
        raise PlanFailed(
            f"{what} is still {payment_state} at {iso_z(now)}, more than 12 hours after its purchase at "
            f"{iso_z(purchased.at)}"
        )
    if start is not None and now > start + DEADLINE_AFTER_START:
        raise ActivationTimeout(
            f"{what} is still {state} at {iso_z(now)}, more than 2 hours after its start {iso_z(start)}"
        )


def require_not_final(history: list[LedgerEntry], request_id: str) -> None:
    """Refuse to buy for a reservation that already ended.

    Raises:
        ReservationCancelled: a final state (cancelled, rejected, failed, released) is recorded.
    """
    final = final_state(history)
    if final is not None:
        raise ReservationCancelled(f"reservation {request_id} is {final.value}; nothing was bought")


def require_within_budget(request: ReservationRequest, offering: OfferingSummary) -> None:
    """Refuse to buy an offering above the request's budget.

    Raises:
        BudgetExceeded: ``upfront_fee_usd`` is above ``max_upfront_fee_usd``.
    """
    if offering.upfront_fee_usd > request.max_upfront_fee_usd:
        raise BudgetExceeded(
            f"offering {offering.offering_id} costs {format_usd(offering.upfront_fee_usd)}, "
            f"above the budget {format_usd(request.max_upfront_fee_usd)}; nothing was bought"
        )


def final_state(history: list[LedgerEntry]) -> State | None:
    """The latest final state (RELEASED, REJECTED, FAILED, CANCELLED) in ``history``, or None."""
    for entry in reversed(history):
        if entry.state in FINAL_STATES:
            return entry.state
    return None


def ensure_owned(sagemaker: Any, arn: str, request_id: str, what: str) -> None:
    """Refuse to adopt ``arn`` when its ``capacity-orchestrator:request-id`` tag names another request.

    Raises:
        NameCollision: the resource is tagged for another request.
    """
    owner = (sagemaker.resource_tags(arn) or {}).get(TAG_REQUEST_ID)
    if owner is not None and owner != request_id:
        raise NameCollision(
            f"{what} {arn} belongs to request {owner!r}, not {request_id!r}; it was not adopted"
        )


def first_entry(history: list[LedgerEntry], state: State) -> LedgerEntry | None:
    """The first entry with ``state``, or None."""
    return next((entry for entry in history if entry.state == state), None)


def post(ports: Ports, message: SlackMessage) -> None:
    """Post to Slack, best effort (a notification never fails a step).

    A message about a request made in Slack (``message.request_id`` with a ``SLACK_THREAD`` ledger item)
    goes to the requester's channel, in the request's thread: the first such message opens the thread
    with a summary of the request (its ``ts`` is kept in ``SLACK_ROOT``). Other messages go to the default
    channel (env ``SLACK_CHANNEL_ID``), and so does any message whose thread cannot be read (the ledger
    throttled): a release failure told nobody when the read failed (soak seed 302 #45).
    """
    try:
        routed = _in_thread(ports, message)
    except Exception as exc:  # the thread could not be read (throttled): the channel still hears it
        logger.warning("Slack thread of %s unknown, posting to the channel: %s", message.request_id, exc)
        routed = message
    try:
        ports.slack.post(routed)
    except Exception as exc:  # a notification must never fail the workflow
        logger.warning("Slack notification failed: %s", exc)


def _in_thread(ports: Ports, message: SlackMessage) -> SlackMessage:
    """``message`` routed to its request's Slack thread, when the request came from Slack."""
    if message.request_id is None or message.channel is not None:
        return message
    origin = ports.ledger.get(message.request_id, SLACK_THREAD)
    if origin is None:
        return message
    channel = str(origin["channel_id"])
    root = ports.ledger.get(message.request_id, SLACK_ROOT)
    if root is None:
        request = ports.ledger.get_request(message.request_id)
        opening = messages.thread_root(request, request_id=message.request_id, user_id=str(origin["user_id"]))
        ts = ports.slack.publish(dataclasses.replace(opening, channel=channel))
        if not ts:  # not posted: say it in the channel, without a thread
            return dataclasses.replace(message, channel=channel)
        # Two steps may open the thread at once: the first recorded root wins, the other stays alone.
        _, root = ports.ledger.put_once(message.request_id, SLACK_ROOT, {"channel_id": channel, "ts": ts})
    return dataclasses.replace(message, channel=str(root["channel_id"]), thread_ts=str(root["ts"]))
