"""The reservations ledger: an append-only DynamoDB history of every state change and every dollar.

Over 400 lines: the ledger's write protocol (conditional puts, CURRENT transactions) is one unit.

Table (env ``LEDGER_TABLE``): PK ``request_id`` (S), SK ``sk`` (S). Every item is put with
``ConditionExpression attribute_not_exists(sk)`` (a state that must not follow an outcome in one
``TransactWriteItems`` with a ``ConditionCheck`` on ``OUTCOME``); nothing is ever updated or deleted, and
only ``CURRENT`` (below) is replaced.

Every kind of item (its ``sk``, what it records, who writes it, whether it is written once or replaced) is
in the catalogue :mod:`capacity.record_kinds`. This module writes the lifecycle's: the state changes
(``STATE#<time>#<seq>``), ``CURRENT`` (the snapshot, the one item ever replaced: put in the same transaction
as each change, on the condition that it still holds the version the change was decided from, so it is never
behind the history and a write that lands late never moves it back), ``OUTCOME``, ``REQUEST``, ``RESUME#``
and the claims of brought reservations (partition ``BROUGHT#<reservation ARN>``: :meth:`Ledger.claim_brought`,
:meth:`Ledger.brought_by`), and the costs rollup (issue 31,
:mod:`capacity.cost_rollup`: partitions ``COSTS#<team>#<month>`` and ``COSTS``, and ``COST`` in the
reservation's), written in the transaction of each entry that carries money (and of ``RELEASED``, with the
reservation's final figures), each replaced whole on its ``version``.

Every item carries a ``write_id``. A botocore retry of a put that did commit (a timeout after the write)
meets its own item: :meth:`Ledger.put_once` recognises it by the ``write_id`` and reports success
instead of a conflict.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from capacity import cost_rollup
from capacity.adapters.clients import error_code
from capacity.adapters.dynamodb import call_dynamodb, deserialize_item, query_all, serialize_item
from capacity.errors import (
    CapacityError,
    MoneyInFlight,
    ReservationCancelled,
    RetryableAwsError,
    TransitionRefused,
)
from capacity.lifecycle import RULES, Event, Snapshot, Verdict, decide, event_of
from capacity.pricing import money_str
from capacity.record_kinds import (
    BROUGHT_PREFIX,
    CURRENT,
    OUTCOME,
    PURCHASE,
    REQUEST,
    RESUME_PREFIX,
    STATE_PREFIX,
)
from capacity.records import LedgerEntry, State
from capacity.request import ReservationRequest, parse_request
from capacity.timeutil import iso_ms, utcnow

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

MAX_SEQ_ATTEMPTS = 50
MAX_CONFLICT_RETRIES = 5
"""How often a state's transaction is tried again after a ``TransactionConflict`` on ``CURRENT``."""
MAX_BATCH_GET = 100
"""DynamoDB's ``BatchGetItem`` limit: keys per call."""
LISTING_INDEX = "listing"
"""The ledger's sparse GSI over the ``REQUEST`` items (PK ``listing``, SK ``written_at``)."""
LISTING = "reservation"
"""The ``listing`` attribute's value on every ``REQUEST`` item (the GSI's only partition)."""


class Ledger:
    """Append-only access to the reservations ledger.

    Args:
        table_name: env ``LEDGER_TABLE``.
        client: a DynamoDB client (standard retries).
        clock: returns the current UTC time (tests and the local cloud's virtual clock).

    Every method may raise :class:`~capacity.errors.RetryableAwsError` on throttling/5xx.
    """

    def __init__(
        self, table_name: str, client: DynamoDBClient, *, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._table = table_name
        self._client = client
        self._clock = clock
        self.rollup = cost_rollup.RollupStore(table_name, client)
        """Reads of the costs rollup (:class:`~capacity.cost_rollup.RollupStore`)."""

    # ----------------------------------------------------------------------------- generic items

    def get(self, request_id: str, sk: str) -> dict[str, Any] | None:
        """The item ``(request_id, sk)`` (strongly consistent read), or None."""
        answer = call_dynamodb(
            "GetItem",
            lambda: self._client.get_item(
                TableName=self._table,
                Key={"request_id": {"S": request_id}, "sk": {"S": sk}},
                ConsistentRead=True,
            ),
        )
        item = answer.get("Item")
        return deserialize_item(item) if item else None

    def put_once(
        self, request_id: str, sk: str, attributes: Mapping[str, Any], *, write_id: str | None = None
    ) -> tuple[bool, dict[str, Any]]:
        """Put item ``(request_id, sk)`` unless it exists.

        Args:
            attributes: the item's other attributes (JSON-like values).
            write_id: identifies this write; pass a stable id (e.g. an event id) so that a retry of the
                same logical write counts as the creator. Default: a fresh UUID.

        Returns:
            ``(created, item)``: ``created`` is True if this call (or an earlier attempt with the same
            ``write_id``) wrote the item; ``item`` is the item as stored.
        """
        wid = write_id or uuid.uuid4().hex
        item = self._new_item(request_id, sk, attributes, wid)
        try:
            call_dynamodb(
                "PutItem",
                lambda: self._client.put_item(
                    TableName=self._table,
                    Item=serialize_item(item),
                    ConditionExpression="attribute_not_exists(sk)",
                ),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            existing = self.get(request_id, sk)
            if existing is None:  # pragma: no cover - a conditional failure means it exists
                raise RetryableAwsError(f"ledger item {sk} vanished after a conflict") from exc
            return existing.get("write_id") == wid, existing
        return True, deserialize_item(serialize_item(item))

    def _new_item(
        self, request_id: str, sk: str, attributes: Mapping[str, Any], write_id: str
    ) -> dict[str, Any]:
        return {
            **attributes,
            "request_id": request_id,
            "sk": sk,
            "write_id": write_id,
            "written_at": iso_ms(self._clock()),
        }

    def items(self, request_id: str, prefix: str | None = None) -> list[dict[str, Any]]:
        """Every item of the reservation (optionally those whose ``sk`` starts with ``prefix``)."""
        sk_prefix = ("sk", prefix) if prefix else None
        return list(
            query_all(
                self._client, table=self._table, partition=("request_id", request_id), sk_prefix=sk_prefix
            )
        )

    # ----------------------------------------------------------------------------- the request

    def claim_brought(self, arn: str, request_id: str) -> None:
        """Record that ``request_id`` adopts the brought reservation ``arn`` (idempotent)."""
        self.put_once(BROUGHT_PREFIX + arn, request_id, {"claimed_by": request_id}, write_id=request_id)

    def brought_by(self, arn: str) -> list[str]:
        """The request ids that adopted the brought reservation ``arn``, in id order."""
        return [str(item["sk"]) for item in self.items(BROUGHT_PREFIX + arn)]

    def record_request(self, request: ReservationRequest, *, actor: str, write_id: str | None = None) -> bool:
        """Put the ``REQUEST`` item and the ``REQUESTED`` state.

        ``REQUESTED`` is recorded through the lifecycle (:meth:`record`): after a ``DELETE`` that landed
        between the two writes (and recorded ``CANCELLED``) it is refused, so the ledger never reads
        ``CANCELLED -> REQUESTED`` (issue 13, defect 8).

        Args:
            write_id: the delivery's stable id (the EventBridge event id), so a retried delivery is not
                mistaken for a duplicate.

        Returns:
            True for a new request (or a retry of the delivery that created it), False for a duplicate.

        Raises:
            ReservationCancelled: the request was cancelled between the two writes (nothing more is
                written; the workflow must stop).
        """
        created, _ = self.put_once(
            request.id,
            REQUEST,
            {"request": request.model_dump(mode="json"), "actor": actor, "listing": LISTING},
            write_id=write_id,
        )
        if created:
            self.record(
                request.id,
                Event.REQUEST,
                actor=actor,
                detail={"requester": request.requester, "dry_run": request.dry_run},
            )
        return created

    def owner(self, request_id: str) -> str | None:
        """The reserve execution (ARN) that carries the request: the one that recorded ``REQUEST``, or the
        last one that resumed it after it was stopped (``RESUME#`` items); None when nothing is recorded."""
        item = self.get(request_id, REQUEST)
        if item is None:
            return None
        owner = str(item.get("write_id") or "")
        for _ in range(100):  # a chain of resumes, each naming its successor
            resumed = self.get(request_id, f"{RESUME_PREFIX}{owner}")
            if resumed is None:
                break
            owner = str(resumed["execution"])
        return owner or None

    def get_request(self, request_id: str) -> ReservationRequest | None:
        """The validated request recorded for ``request_id``, or None."""
        item = self.get(request_id, REQUEST)
        if item is None:
            return None
        return parse_request(item["request"], now=None)

    def list_requests(
        self, *, limit: int, start_key: Mapping[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """One page of ``REQUEST`` items, newest first (GSI :data:`LISTING_INDEX`, eventually consistent).

        Args:
            limit: at most this many items (DynamoDB ``Limit``).
            start_key: the ``last_key`` of the previous page (plain strings), or None for the first page.

        Returns:
            ``(items, last_key)``: ``last_key`` (plain strings) is None after the last page.
        """
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": LISTING_INDEX,
            "KeyConditionExpression": "listing = :listing",
            "ExpressionAttributeValues": {":listing": {"S": LISTING}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = serialize_item(start_key)
        page = call_dynamodb("Query", lambda: self._client.query(**kwargs))
        last = page.get("LastEvaluatedKey")
        return [deserialize_item(item) for item in page.get("Items", [])], (
            deserialize_item(last) if last else None
        )

    # ----------------------------------------------------------------------------- states

    def snapshot(self, request_id: str) -> Snapshot:
        """The reservation's lifecycle snapshot (:class:`~capacity.lifecycle.Snapshot`), from its
        :data:`CURRENT` item (strongly consistent); a reservation recorded before the snapshot was kept there
        (no ``version``) is read from its history (:func:`snapshot_of`)."""
        item = self.get(request_id, CURRENT)
        if item is not None and item.get("version") is not None:
            return _snapshot(item)
        return snapshot_of(self.history(request_id), state_sk=item.get("state_sk") if item else None)

    def record(
        self,
        request_id: str,
        event: Event,
        *,
        actor: str,
        detail: Mapping[str, Any] | None = None,
        money_usd: Decimal | None = None,
        key: str | None = None,
        spend: Mapping[str, Any] | None = None,
    ) -> LedgerEntry | None:
        """Record ``event`` if the lifecycle's table allows it from the reservation's current snapshot: the
        entry (``STATE#<now ms>#<seq>``, when the event records one), the new :data:`CURRENT` and, for an
        outcome, the :data:`OUTCOME` marker, in one ``TransactWriteItems`` conditional on the snapshot's
        ``version`` (:func:`capacity.lifecycle.decide`). When another writer moved the snapshot first, the
        event is decided again from the new one: two writers racing never both win, and nothing the table
        forbids is written.

        Args:
            event: what happens (:class:`~capacity.lifecycle.Event`).
            detail: the entry's small JSON map.
            money_usd: the money the entry records (a fee; negative: a refund).
            key: the money in flight the event opens or closes (``MONEY_CALL``, ``MONEY_SETTLED``,
                ``EXTEND``).
            spend: the reservation's final figures, with ``RELEASED`` (``reservation_spend`` at the release):
                the costs rollup closes the reservation with them.

        An entry with money (and ``PURCHASED``, and ``RELEASED`` with ``spend``) updates the costs rollup in
        the same transaction (:mod:`capacity.cost_rollup`).

        Returns:
            The entry written; None when the event was skipped (done already: a retry, a duplicate, a late
            step) or records no entry (money in flight).

        Raises:
            ReservationCancelled: the reservation has an outcome or its release began (the writer stops).
            MoneyInFlight: the release may not begin while money is in flight (the release waits).
            TransitionRefused: the table does not allow ``event`` from the current phase.
        """
        taken: str | None = None  # a state item's key found taken (never by this protocol's writers)
        for _ in range(MAX_SEQ_ATTEMPTS):
            snapshot = self.snapshot(request_id)
            verdict = decide(snapshot, event, key=key)
            if verdict.action == "skip":
                return None
            if verdict.action == "refuse":
                raise _refusal(request_id, event, verdict)
            try:
                return self._commit(
                    request_id, snapshot, verdict, _Entry(actor, dict(detail or {}), money_usd, spend), taken
                )
            except _Lost as lost:
                taken = lost.taken or taken
        raise RetryableAwsError(
            f"{request_id}: {event.value} lost the race for the ledger {MAX_SEQ_ATTEMPTS} times"
        )

    def _commit(
        self, request_id: str, before: Snapshot, verdict: Verdict, entry: _Entry, taken: str | None
    ) -> LedgerEntry | None:
        """Write ``verdict`` conditionally on ``before``'s version: the entry written (None: no entry).

        Raises:
            _Lost: another writer moved the snapshot first (decide again), or the entry's key was taken.
        """
        wid = uuid.uuid4().hex
        after = verdict.after
        writes: list[Any] = []
        state_item: dict[str, Any] | None = None
        if verdict.records is not None:
            sk = _next_state_sk(max(before.state_sk or "", taken or "") or None, self._clock())
            attributes: dict[str, Any] = {
                "state": verdict.records.value,
                "at": sk[len(STATE_PREFIX) : len(STATE_PREFIX) + 24],
                "actor": entry.actor,
                "detail": entry.detail,
            }
            if entry.money_usd is not None:
                attributes["money_usd"] = money_str(entry.money_usd)
            state_item = self._new_item(request_id, sk, attributes, wid)
            writes.append(_put_new(self._table, state_item))
            after = replace(after, state_sk=sk)
            writes.extend(self._rollup_writes(request_id, verdict.records, sk, entry, wid))
        if verdict.records is not None and after.outcome is not None and after.outcome != before.outcome:
            # The outcome's marker (readers that only need "has it ended?" read this one item).
            marker: dict[str, Any] = {
                "outcome": after.outcome.value,
                "actor": entry.actor,
                "detail": entry.detail,
            }
            if entry.money_usd is not None:
                marker["money_usd"] = money_str(entry.money_usd)
            writes.append(_put_new(self._table, self._new_item(request_id, OUTCOME, marker, wid)))
        mirror = self._new_item(request_id, CURRENT, _current_attributes(after), wid)
        if before.version:
            condition: dict[str, Any] = {
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": {"N": str(before.version)}},
            }
        else:  # nothing recorded under a snapshot yet (or recorded before snapshots were kept)
            condition = {"ConditionExpression": "attribute_not_exists(sk) OR attribute_not_exists(version)"}
        writes.append({"Put": {"TableName": self._table, "Item": serialize_item(mirror), **condition}})
        try:
            call_dynamodb(
                "TransactWriteItems", lambda: self._client.transact_write_items(TransactItems=writes)
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            current = self.get(request_id, CURRENT)
            if current is not None and current.get("write_id") == wid:  # a botocore retry of our own commit
                return _entry(state_item) if state_item is not None else None
            reasons = [str(r.get("Code")) for r in exc.response.get("CancellationReasons") or []]
            if "TransactionConflict" in reasons:  # another transaction on CURRENT at the same moment
                time.sleep(random.uniform(0.01, 0.05))  # noqa: S311 - jitter
            stolen = state_item is not None and reasons[:1] == ["ConditionalCheckFailed"]
            raise _Lost(str(state_item["sk"]) if stolen and state_item else None) from exc
        return _entry(state_item) if state_item is not None else None

    def _rollup_writes(
        self, request_id: str, records: State, sk: str, entry: _Entry, wid: str
    ) -> list[dict[str, Any]]:
        """The costs rollup's writes for the entry ``sk`` (none when it carries no money and is neither
        ``PURCHASED`` nor a release's figures, or when the reservation has no rollup: nothing was bought)."""
        purchased = records is State.PURCHASED
        opens = records in cost_rollup.OPENING_STATES
        if entry.money_usd is None and entry.spend is None and not opens:
            return []
        writes: list[dict[str, Any]] = []
        pointer = self.get(request_id, cost_rollup.POINTER)
        if pointer is None:
            bought = self.get(request_id, PURCHASE)
            if bought is None:
                return []
            # PURCHASED's month (the money committed); on demand has none: the launch's (its start)
            month = (
                sk[len(STATE_PREFIX) : len(STATE_PREFIX) + 7] if purchased else str(bought["start_time"])[:7]
            )
            reservation = self._rollup_reservation(request_id, bought)
            change = cost_rollup.Change(request_id, month, entry.money_usd, True, entry.spend)
            pk = cost_rollup.partition(reservation.team, month)
            line = cost_rollup.new_line(change, reservation)
            total = self.rollup.get(pk, cost_rollup.TOTAL) or cost_rollup.new_total(reservation.team, month)
            writes.append(
                _put_new(self._table, self._new_item(request_id, cost_rollup.POINTER, {"rollup": pk}, wid))
            )
            index = cost_rollup.with_team_month(
                self.rollup.get(cost_rollup.INDEX_PARTITION, cost_rollup.INDEX), reservation.team, month
            )
            if index is not None:
                writes.append(cost_rollup.put_versioned(self._table, index))
        else:
            pk = str(pointer["rollup"])
            found = self.rollup.get(pk, cost_rollup.LINE + request_id)
            stored = self.rollup.get(pk, cost_rollup.TOTAL)
            if found is None or stored is None:  # pragma: no cover - written with the pointer
                return []
            if entry.money_usd is None and entry.spend is None:  # opened already: nothing moves
                return []
            line, total = found, stored
            change = cost_rollup.Change(request_id, str(line["month"]), entry.money_usd, False, entry.spend)
        line, total = cost_rollup.apply(change, line, total)
        writes.append(cost_rollup.put_versioned(self._table, line))
        writes.append(cost_rollup.put_versioned(self._table, total))
        return writes

    def _rollup_reservation(self, request_id: str, purchase: Mapping[str, Any]) -> cost_rollup.Reservation:
        """What the rollup keeps of a reservation bought now: its request's team and instance type, its
        purchase's region, market and whether it was brought."""
        request = (self.get(request_id, REQUEST) or {}).get("request") or {}
        return cost_rollup.Reservation(
            team=request.get("team"),
            instance_type=request.get("instance_type"),
            region=purchase.get("region"),
            market=str(purchase.get("market") or "reserved"),
            brought=bool(purchase.get("brought")),
        )

    def current_states(self, request_ids: Sequence[str]) -> dict[str, State]:
        """The latest state of each reservation from its :data:`CURRENT` item: one ``BatchGetItem`` (at most
        100 ids, eventually consistent, as the listing index is). A reservation whose item is missing
        (recorded before ``CURRENT`` existed) or left unprocessed twice is read from its history.

        Returns:
            ``{request_id: state}`` for every reservation that has a state.

        Raises:
            ValueError: more than :data:`MAX_BATCH_GET` ids.
        """
        if len(request_ids) > MAX_BATCH_GET:
            raise ValueError(f"at most {MAX_BATCH_GET} request ids per call, got {len(request_ids)}")
        found: dict[str, State] = {}
        keys: list[Any] = [
            {"request_id": {"S": rid}, "sk": {"S": CURRENT}} for rid in dict.fromkeys(request_ids)
        ]
        for _ in range(2):  # DynamoDB may leave keys unprocessed under load; the rest is queried below
            if not keys:
                break
            requested: dict[str, Any] = {self._table: {"Keys": keys}}
            answer = call_dynamodb(
                "BatchGetItem", partial(self._client.batch_get_item, RequestItems=requested)
            )
            for raw in answer.get("Responses", {}).get(self._table, []):
                mirror = deserialize_item(raw)
                found[str(mirror["request_id"])] = State(str(mirror["current_state"]))
            unprocessed: dict[str, Any] = dict(answer.get("UnprocessedKeys") or {})
            keys = list((unprocessed.get(self._table) or {}).get("Keys") or [])
        for rid in request_ids:
            if rid not in found:
                state = self.current_state(rid)
                if state is not None:
                    found[rid] = state
        return found

    def history(self, request_id: str) -> list[LedgerEntry]:
        """Every state change of the reservation, oldest first."""
        return history_of(self.items(request_id, STATE_PREFIX))

    def current_state(self, request_id: str) -> State | None:
        """The latest state recorded, or None when nothing is."""
        history = self.history(request_id)
        return history[-1].state if history else None


def history_of(items: Sequence[Mapping[str, Any]]) -> list[LedgerEntry]:
    """The state changes among a reservation's items (as :meth:`Ledger.items` returns them, ordered by
    ``sk``), oldest first: what :meth:`Ledger.history` answers, without a query of its own."""
    return [_entry(item) for item in items if str(item.get("sk", "")).startswith(STATE_PREFIX)]


def image_item(image: Mapping[str, Any]) -> dict[str, Any]:
    """A ledger item as its stream record carries it (``NewImage``, DynamoDB JSON) -> the item as
    :meth:`Ledger.get` answers it (JSON-safe values)."""
    return deserialize_item(image)


def _entry(item: Mapping[str, Any]) -> LedgerEntry:
    return LedgerEntry(
        request_id=item["request_id"],
        sk=item["sk"],
        state=State(item["state"]),
        at=item["at"],
        actor=item.get("actor", ""),
        detail=item.get("detail") or {},
        money_usd=Decimal(item["money_usd"]) if item.get("money_usd") is not None else None,
    )


@dataclass(frozen=True)
class _Entry:
    """What a recorded entry carries besides its state."""

    actor: str
    detail: dict[str, Any]
    money_usd: Decimal | None
    spend: Mapping[str, Any] | None = None


class _Lost(Exception):  # noqa: N818 - internal: the write lost a race (never leaves the ledger)
    """Another writer moved the snapshot first (decide again); ``taken``: the entry's key was taken."""

    def __init__(self, taken: str | None) -> None:
        super().__init__(taken or "lost")
        self.taken = taken


def _put_new(table: str, item: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": table,
            "Item": serialize_item(item),
            "ConditionExpression": "attribute_not_exists(sk)",
        }
    }


def _next_state_sk(previous: str | None, now: datetime) -> str:
    """``STATE#<ms>#<seq>`` after ``previous``: never earlier than it (a writer whose clock is behind the last
    one's still records after it), the next sequence number within one millisecond."""
    at = iso_ms(now)
    seq = 0
    if previous:
        last_at, _, last_seq = previous[len(STATE_PREFIX) :].partition("#")
        if last_at >= at:
            at, seq = last_at, int(last_seq or 0) + 1
    return f"{STATE_PREFIX}{at}#{seq:04d}"


def _current_attributes(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "current_state": snapshot.state.value if snapshot.state else None,
        "state_sk": snapshot.state_sk,
        "phase": snapshot.phase.value if snapshot.phase else None,
        "outcome": snapshot.outcome.value if snapshot.outcome else None,
        "in_flight": sorted(snapshot.in_flight),
        "version": snapshot.version,
    }


def _snapshot(item: Mapping[str, Any]) -> Snapshot:
    def state(name: str) -> State | None:
        value = item.get(name)
        return State(str(value)) if value else None

    return Snapshot(
        phase=state("phase"),
        outcome=state("outcome"),
        in_flight=frozenset(str(k) for k in item.get("in_flight") or []),
        version=int(item.get("version") or 0),
        state=state("current_state"),
        state_sk=str(item["state_sk"]) if item.get("state_sk") else None,
    )


def snapshot_of(history: Sequence[LedgerEntry], *, state_sk: str | None = None) -> Snapshot:
    """The snapshot a history leads to (for reservations recorded before snapshots were kept): the phase and
    the outcome its entries set, no money in flight, version 0."""
    phase: State | None = None
    outcome: State | None = None
    for entry in history:
        event = event_of(entry.state, entry.detail, phase=phase)
        rule = RULES[event]
        phase = rule.to or phase
        outcome = outcome or rule.outcome
    last = history[-1] if history else None
    return Snapshot(
        phase=phase,
        outcome=outcome,
        state=last.state if last else None,
        state_sk=last.sk if last else state_sk,
    )


def _refusal(request_id: str, event: Event, verdict: Verdict) -> CapacityError:
    """The error a refused ``event`` raises (its message names the state and what was not recorded)."""
    records = RULES[event].records
    what = records.value if records is not None else event.value
    if verdict.stopped:
        return ReservationCancelled(
            f"reservation {request_id} {verdict.reason}: {what} is not recorded after it"
        )
    if verdict.waits_for_money:
        return MoneyInFlight(f"reservation {request_id}: {verdict.reason}; {event.value} waits for it")
    return TransitionRefused(f"reservation {request_id}: {verdict.reason}")
