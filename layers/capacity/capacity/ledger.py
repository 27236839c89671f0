"""The reservations ledger: an append-only DynamoDB history of every state change and every dollar.

Over 400 lines: the ledger's write protocol (conditional puts, CURRENT transactions) is one unit.

Table (env ``LEDGER_TABLE``): PK ``request_id`` (S), SK ``sk`` (S). Every item is put with
``ConditionExpression attribute_not_exists(sk)`` (a state that must not follow an outcome in one
``TransactWriteItems`` with a ``ConditionCheck`` on ``OUTCOME``); nothing is ever updated or deleted, and
only ``CURRENT`` (below) is replaced.

- State changes: ``sk = "STATE#<YYYY-MM-DDTHH:MM:SS.mmmZ>#<seq>"`` with ``state``, ``at``, ``actor``,
  ``detail`` (small map) and ``money_usd`` (decimal string) when money moves. ``seq`` (4 digits) orders
  several changes within one millisecond (the local cloud's clock stands still while code runs).
- Special items: ``REQUEST`` (the validated request; its conditional put is the dedupe),
  ``PURCHASE_INTENT`` (put before calling AWS, with its ``owner`` execution), ``PURCHASE_CALL#<time>``
  (each purchase call, put just before it is made, with its offering), ``PURCHASE`` (the result),
  ``PURCHASE_VOIDED`` (AWS charged nothing after all: a plan ``Failed``, a block ``payment-failed``; the
  ``FAILED`` that follows carries the negative money), ``PURCHASE_MISSED#<n>`` (attempt ``n - 1`` of a
  request that keeps looking bought nothing: its offering was taken; the next attempt writes
  ``PURCHASE_INTENT#<n>``, :mod:`capacity.logic.attempts`), ``APPROVAL`` (task token; a retried approval task
  adds ``APPROVAL#<time>#<seq>``), ``APPROVAL_DECISION``, ``RELEASED`` (marker:
  exactly one release summary even if two releases race), ``SLACK_THREAD``/``SLACK_ROOT`` (where a
  request made in Slack reports its progress), ``DEGRADED#<time>`` (a reserve step that kept failing on
  transient faults once money was at stake: :mod:`capacity.logic.degraded`), ``RESUME#<execution ARN>``
  (the execution that carries on a stopped one: :mod:`capacity.logic.stopped`), ``RELEASE_FAILURE_TOLD#<sk>``
  (the alert of the release failure ``FAILED`` at ``sk`` was posted: :mod:`capacity.logic.notify`).
- ``CURRENT``: the latest state, for the listing (``current_state``, ``state_sk`` of the ``STATE#`` item it
  mirrors). The one item that is ever replaced: put in the same transaction as each ``STATE#`` item, on the
  condition that it mirrors an earlier one, so it is never behind the history and a write that lands late
  never moves it back.
- Claims of brought reservations (issue 17): partition ``BROUGHT#<reservation ARN>``, one item per request
  that adopted it (``sk`` = its request id): :meth:`Ledger.claim_brought`, :meth:`Ledger.brought_by`.

Every item carries a ``write_id``. A botocore retry of a put that did commit (a timeout after the write)
meets its own item: :meth:`Ledger.put_once` recognises it by the ``write_id`` and reports success
instead of a conflict.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from capacity.adapters.clients import error_code
from capacity.adapters.dynamodb import call_dynamodb, deserialize_item, query_all, serialize_item
from capacity.errors import ReservationCancelled, RetryableAwsError
from capacity.pricing import money_str
from capacity.records import LedgerEntry, State
from capacity.request import ReservationRequest, parse_request
from capacity.timeutil import iso_ms, utcnow

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

STATE_PREFIX = "STATE#"
REQUEST = "REQUEST"
PURCHASE_INTENT = "PURCHASE_INTENT"
PURCHASE = "PURCHASE"
PURCHASE_CALL = "PURCHASE_CALL"
PURCHASE_VOIDED = "PURCHASE_VOIDED"
PURCHASE_MISSED = "PURCHASE_MISSED"
DEGRADED = "DEGRADED"
APPROVAL = "APPROVAL"
APPROVAL_DECISION = "APPROVAL_DECISION"
APPROVAL_DELIVERED = "APPROVAL_DELIVERED"
APPROVAL_REFUSED = "APPROVAL_REFUSED"
"""``APPROVAL_REFUSED#<time>#<nonce>``: an approval (or rejection) refused (identity, approved, reason, and
``extension_id`` for an extension's)."""
"""Put once the recorded decision was handed back to the waiting task (``SendTaskSuccess``/``Failure``)."""
SEARCH_WAIT = "SEARCH_WAIT"
"""``SEARCH_WAIT#<time>#<nonce>``: the task token of a wait between two looks (keep looking, issue 17); the
newest is the live one, which a cancel fails."""
RELEASED_MARKER = "RELEASED"
OUTCOME = "OUTCOME"
RESUME_PREFIX = "RESUME#"
"""``RESUME#<stopped execution ARN>``: ``execution`` is the one that resumed it (the workflow's new owner)."""
"""Conditional marker of the reservation's one outcome (``CANCELLED``, ``REJECTED`` or ``FAILED``)."""
SUBMITTED = "SUBMITTED"
"""Put by the API when it accepts a POST (before ``ReservationRequested``): the id is known."""
CANCEL_REQUESTED = "CANCEL_REQUESTED"
"""Put by the API when a DELETE arrives before ``REQUEST`` is recorded: the request must not proceed."""
CURRENT = "CURRENT"
"""The latest state (``current_state``, ``state_sk``): replaced with each later ``STATE#`` item, in one
transaction."""
SLACK_THREAD = "SLACK_THREAD"
"""Put by ``record_request`` for a request made in Slack: ``channel_id``, ``user_id`` (and ``team_id``)."""
SLACK_ROOT = "SLACK_ROOT"
"""The first message of the request's Slack thread: ``channel_id`` and ``ts`` (replies go under it)."""
MAX_SEQ_ATTEMPTS = 50
MAX_CONFLICT_RETRIES = 5
"""How often a state's transaction is tried again after a ``TransactionConflict`` on ``CURRENT``."""
MAX_BATCH_GET = 100
"""DynamoDB's ``BatchGetItem`` limit: keys per call."""
LISTING_INDEX = "listing"
"""The ledger's sparse GSI over the ``REQUEST`` items (PK ``listing``, SK ``written_at``)."""
LISTING = "reservation"
"""The ``listing`` attribute's value on every ``REQUEST`` item (the GSI's only partition)."""
BROUGHT_PREFIX = "BROUGHT#"
"""``BROUGHT#<reservation ARN>``: the partition of the requests that adopted a brought reservation."""


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

        ``REQUESTED`` is written only while no outcome is recorded (:meth:`append` ``unless_outcome``): a
        ``DELETE`` landing between the two writes finds ``REQUEST`` and records ``CANCELLED``, and the
        ledger never reads ``CANCELLED -> REQUESTED`` (issue 13, defect 8).

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
            self.append(
                request.id,
                State.REQUESTED,
                actor=actor,
                detail={"requester": request.requester, "dry_run": request.dry_run},
                once=True,
                unless_outcome=True,
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

    def append(
        self,
        request_id: str,
        state: State,
        *,
        actor: str,
        detail: Mapping[str, Any] | None = None,
        money_usd: Decimal | None = None,
        once: bool = False,
        unless_outcome: bool = False,
    ) -> LedgerEntry | None:
        """Append a state change ``STATE#<now ms>#<seq>``.

        Args:
            once: skip (return None) if the history already holds ``state`` (retried steps).
            unless_outcome: write only if no :data:`OUTCOME` is recorded, atomically (one
                ``TransactWriteItems``: a ``ConditionCheck`` on ``OUTCOME`` and the put). A step that must
                never follow a cancel (``AWAITING_APPROVAL``) cannot slip in between a check and its write.

        Returns:
            The entry written, or None when ``once`` skipped it.

        Raises:
            ReservationCancelled: ``unless_outcome`` and an outcome is recorded (the message names it).
        """
        if once:
            for entry in self.history(request_id):
                if entry.state == state:
                    return None
        at = self._clock()
        prefix = f"{STATE_PREFIX}{iso_ms(at)}#"
        seq = len(self.items(request_id, prefix))
        attributes: dict[str, Any] = {
            "state": state.value,
            "at": iso_ms(at),
            "actor": actor,
            "detail": dict(detail or {}),
        }
        if money_usd is not None:
            attributes["money_usd"] = money_str(money_usd)
        for _ in range(MAX_SEQ_ATTEMPTS):
            sk = f"{prefix}{seq:04d}"
            created, item = self._put_state(request_id, sk, attributes, unless_outcome=unless_outcome)
            if created:
                return _entry(item)
            seq += 1  # another writer took this sequence number in the same millisecond
        raise RetryableAwsError(f"could not find a free ledger sequence number for {request_id} at {prefix}")

    def _put_state(
        self,
        request_id: str,
        sk: str,
        attributes: Mapping[str, Any],
        *,
        unless_outcome: bool,
        current: bool = True,
        conflicts: int = MAX_CONFLICT_RETRIES,
    ) -> tuple[bool, dict[str, Any]]:
        """Put the ``STATE#`` item ``sk`` unless it exists, with :data:`CURRENT` moved to it, in one
        ``TransactWriteItems`` (and, ``unless_outcome``, a ``ConditionCheck`` that no :data:`OUTCOME` exists).

        When ``CURRENT`` already mirrors a later state (two writers, or a write that landed late), the state
        is put alone: the history takes every state, the listing keeps the latest. A ``TransactionConflict``
        (another append of the reservation writing ``CURRENT`` at the same moment: DynamoDB cancels one of
        two transactions on one item) is tried again, whole, up to :data:`MAX_CONFLICT_RETRIES` times.

        Returns:
            ``(created, item)`` as :meth:`put_once`.

        Raises:
            ReservationCancelled: ``unless_outcome`` and the outcome is recorded (then nothing was written).
            RetryableAwsError: the transaction was cancelled for another reason (a conflicting one).
        """
        wid = uuid.uuid4().hex
        item = self._new_item(request_id, sk, attributes, wid)
        writes: list[Any] = []
        if unless_outcome:
            outcome_key = {"request_id": {"S": request_id}, "sk": {"S": OUTCOME}}
            check = {
                "TableName": self._table,
                "Key": outcome_key,
                "ConditionExpression": "attribute_not_exists(sk)",
            }
            writes.append({"ConditionCheck": check})
        writes.append(
            {
                "Put": {
                    "TableName": self._table,
                    "Item": serialize_item(item),
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            }
        )
        if current:
            mirror = self._new_item(
                request_id, CURRENT, {"current_state": attributes["state"], "state_sk": sk}, wid
            )
            writes.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": serialize_item(mirror),
                        "ConditionExpression": "attribute_not_exists(sk) OR state_sk < :sk",
                        "ExpressionAttributeValues": {":sk": {"S": sk}},
                    }
                }
            )
        try:
            call_dynamodb(
                "TransactWriteItems", lambda: self._client.transact_write_items(TransactItems=writes)
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            # A botocore retry of a transaction that did commit meets its own item: that is success.
            existing = self.get(request_id, sk)
            if existing is not None and existing.get("write_id") == wid:
                return True, existing
            outcome = self.get(request_id, OUTCOME) if unless_outcome else None
            if outcome is not None:
                self.complete_outcome(request_id, outcome)
                raise ReservationCancelled(
                    f"reservation {request_id} is {outcome.get('outcome')}: {attributes.get('state')} "
                    "is not recorded after it"
                ) from exc
            if existing is not None:
                return False, existing
            reasons = [str(r.get("Code")) for r in exc.response.get("CancellationReasons") or []]
            if current and reasons[-1:] == ["ConditionalCheckFailed"] and set(reasons[:-1]) <= {"None"}:
                return self._put_state(
                    request_id, sk, attributes, unless_outcome=unless_outcome, current=False
                )
            if "TransactionConflict" in reasons and conflicts > 0:
                # Another append of this reservation wrote CURRENT at the same moment: try again, whole.
                time.sleep(random.uniform(0.01, 0.05) * (1 + MAX_CONFLICT_RETRIES - conflicts))  # noqa: S311 - jitter
                return self._put_state(
                    request_id,
                    sk,
                    attributes,
                    unless_outcome=unless_outcome,
                    current=current,
                    conflicts=conflicts - 1,
                )
            raise RetryableAwsError(f"ledger transaction for {sk} was cancelled: {exc}") from exc
        return True, deserialize_item(serialize_item(item))

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

    def append_outcome(
        self,
        request_id: str,
        state: State,
        *,
        actor: str,
        detail: Mapping[str, Any] | None = None,
        money_usd: Decimal | None = None,
    ) -> LedgerEntry | None:
        """Append the outcome ``CANCELLED``, ``REJECTED`` or ``FAILED`` unless another one was recorded.

        A reservation has one outcome: the conditional :data:`OUTCOME` item is put first, and only a step
        recording the same outcome (a retry) goes on to append it (once). ``RELEASED`` may still follow
        (the release of a cancelled or failed reservation), and so may a ``FAILED`` of the release (phase
        ``release``, appended with :meth:`append`: resources may still bill). Found by the fault soak:
        ``CANCELLED`` then ``REJECTED``/``FAILED`` in one ledger.

        Returns:
            The entry written, or None when another outcome (or this one, already) is recorded: that outcome's
            entry is then completed if its writer died before appending it (:meth:`complete_outcome`).
        """
        # "outcome", not "state": readers that scan items for a "state" see only the STATE# entries. The
        # entry's detail and money ride along, so whoever meets the outcome can complete its entry.
        marker: dict[str, Any] = {"outcome": state.value, "actor": actor, "detail": dict(detail or {})}
        if money_usd is not None:
            marker["money_usd"] = money_str(money_usd)
        _, item = self.put_once(request_id, OUTCOME, marker)
        if item.get("outcome") != state.value:
            self.complete_outcome(
                request_id, item
            )  # its writer may have died before its entry (seed 602 #120)
            return None
        return self.append(request_id, state, actor=actor, detail=detail, money_usd=money_usd, once=True)

    def complete_outcome(
        self, request_id: str, outcome: Mapping[str, Any] | None = None
    ) -> LedgerEntry | None:
        """Append the entry of the recorded :data:`OUTCOME` if its writer died (or timed out) between the
        marker and the entry (once): a step that stops on the outcome must not leave a ledger whose history
        never says it (soak seed 304 #133: a DELETE's ``CANCELLED`` marker with no entry, and the request's
        ``REQUESTED`` refused after it, left no state at all).

        Returns:
            The entry appended, or None (no outcome, or its entry is there already).
        """
        outcome = outcome if outcome is not None else self.get(request_id, OUTCOME)
        if outcome is None:
            return None
        money = outcome.get("money_usd")
        return self.append(
            request_id,
            State(str(outcome["outcome"])),
            actor=str(outcome.get("actor") or "ledger"),
            detail=dict(outcome.get("detail") or {}),
            money_usd=Decimal(str(money)) if money is not None else None,
            once=True,
        )

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
