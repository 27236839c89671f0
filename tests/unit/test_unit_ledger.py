"""The ledger is append-only, conditional and ordered (moto DynamoDB)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from capacity.adapters import clients
from capacity.errors import ReservationCancelled, RetryableAwsError
from capacity.ledger import CURRENT, OUTCOME, PURCHASE_INTENT, REQUEST, Ledger
from capacity.records import State
from capacity.request import parse_request

from tests.unit.conftest import REGION
from tests.unit.unit_fakes import NOW, Clock, request_body


class RecordingClient:
    """Wraps a DynamoDB client and records the operations called."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.operations: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.operations.append(name)
        return getattr(self._client, name)


def raw_items() -> list[dict[str, Any]]:
    return boto3.client("dynamodb", region_name=REGION).scan(TableName="ledger")["Items"]


def test_state_changes_are_new_items_in_order_even_within_one_millisecond(aws: None) -> None:
    # Given a clock that stands still (as the local cloud's does while code runs)
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    # When three states are appended at the same instant
    for state in (State.REQUESTED, State.PLANNED, State.PURCHASED):
        ledger.append("r1", state, actor="test")
    # Then three items exist, ordered by a sequence number after the timestamp
    history = ledger.history("r1")
    assert [e.state for e in history] == [State.REQUESTED, State.PLANNED, State.PURCHASED]
    assert [e.sk for e in history] == [
        "STATE#2026-12-01T09:00:00.000Z#0000",
        "STATE#2026-12-01T09:00:00.000Z#0001",
        "STATE#2026-12-01T09:00:00.000Z#0002",
    ]
    assert ledger.current_state("r1") is State.PURCHASED


def test_current_follows_the_latest_state_and_a_late_write_never_moves_it_back(aws: None) -> None:
    # Given two reservations with states, one written by a writer whose clock was behind (a late write)
    clock = Clock()
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=clock)
    ledger.append("r1", State.REQUESTED, actor="test")
    ledger.append("r2", State.REQUESTED, actor="test")
    clock.advance(minutes=5)
    ledger.append("r1", State.PURCHASED, actor="test")
    clock.advance(minutes=-3)
    ledger.append("r1", State.PLANNED, actor="late")  # lands after PURCHASED, sorts before it
    # Then the history holds every state, and CURRENT the latest one by the history's order
    assert [e.state for e in ledger.history("r1")] == [State.REQUESTED, State.PLANNED, State.PURCHASED]
    assert ledger.current_states(["r1", "r2", "r-none"]) == {"r1": State.PURCHASED, "r2": State.REQUESTED}
    current = ledger.get("r1", CURRENT)
    assert current is not None
    assert current["state_sk"] == "STATE#2026-12-01T09:05:00.000Z#0000"


def test_current_states_reads_a_page_in_one_call_and_older_reservations_from_their_history(aws: None) -> None:
    # Given a reservation recorded before CURRENT existed (its state item only) and two with CURRENT
    recorder = RecordingClient(clients.dynamodb(REGION))
    ledger = Ledger("ledger", recorder, clock=Clock())  # type: ignore[arg-type]
    ledger.append("new-1", State.READY, actor="test")
    ledger.append("new-2", State.RELEASED, actor="test")
    ledger.put_once(
        "old",
        "STATE#2026-11-01T09:00:00.000Z#0000",
        {"state": "RELEASED", "at": "2026-11-01T09:00:00.000Z", "actor": "a"},
    )
    recorder.operations.clear()
    # When their states are read for a listing page
    states = ledger.current_states(["new-1", "new-2", "old"])
    # Then one BatchGetItem answers the two, and the old one is read from its history
    assert states == {"new-1": State.READY, "new-2": State.RELEASED, "old": State.RELEASED}
    assert recorder.operations == ["batch_get_item", "query"]


def test_nothing_is_ever_updated_or_deleted(aws: None) -> None:
    # Given a ledger whose client records every call
    recorder = RecordingClient(clients.dynamodb(REGION))
    clock = Clock()
    ledger = Ledger("ledger", recorder, clock=clock)  # type: ignore[arg-type]
    request = parse_request(request_body(), now=NOW)
    # When a request and states are recorded, twice, with retries
    ledger.record_request(request, actor="a", write_id="evt-1")
    ledger.record_request(request, actor="a", write_id="evt-2")
    ledger.append(request.id, State.PLANNED, actor="a", once=True)
    clock.advance(seconds=1)
    ledger.append(request.id, State.PLANNED, actor="a", once=True)
    ledger.put_once(request.id, PURCHASE_INTENT, {"x": 1})
    ledger.put_once(request.id, PURCHASE_INTENT, {"x": 2})
    # Then only puts, gets and queries were used (a transaction is a conditional put with a condition
    # check on OUTCOME: REQUESTED is written only while no outcome is), and the first values stand
    assert set(recorder.operations) <= {"put_item", "get_item", "query", "transact_write_items"}
    intent = ledger.get(request.id, PURCHASE_INTENT)
    assert intent is not None
    assert intent["x"] == 1
    assert [e.state for e in ledger.history(request.id)] == [State.REQUESTED, State.PLANNED]


def test_put_once_reports_a_conflict_with_the_existing_item(aws: None) -> None:
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    created, first = ledger.put_once("r1", "PURCHASE_INTENT", {"offering_id": "a"})
    again, existing = ledger.put_once("r1", "PURCHASE_INTENT", {"offering_id": "b"})
    assert created
    assert not again
    assert existing["offering_id"] == "a"
    assert existing["write_id"] == first["write_id"]


def test_a_retried_write_that_had_committed_counts_as_the_creator(aws: None) -> None:
    # Given a put that committed but whose answer was lost (botocore retries it with the same write id)
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.put_once("r1", "REQUEST", {"request": {}}, write_id="evt-7")
    # When the same logical write is retried
    created, _ = ledger.put_once("r1", "REQUEST", {"request": {}}, write_id="evt-7")
    # Then it is recognised as its own write, not as a duplicate
    assert created


def test_record_request_dedupes_other_deliveries_but_not_retries(aws: None) -> None:
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    request = parse_request(request_body(), now=NOW)
    assert ledger.record_request(request, actor="a", write_id="event-1")
    assert ledger.record_request(request, actor="a", write_id="event-1")  # the same delivery, retried
    assert not ledger.record_request(request, actor="a", write_id="event-2")  # another delivery
    assert [e.state for e in ledger.history(request.id)] == [State.REQUESTED]
    stored = ledger.get_request(request.id)
    assert stored == request


def test_money_and_details_round_trip_json_safe(aws: None) -> None:
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    entry = ledger.append(
        "r1",
        State.PURCHASED,
        actor="purchase",
        detail={"cpu": 0.25, "count": 2, "nested": {"ok": True}},
        money_usd=Decimal("8523.654"),
    )
    assert entry is not None
    (item,) = [i for i in raw_items() if i["sk"]["S"].startswith("STATE#")]
    assert item["money_usd"] == {"S": "8523.65"}
    (read,) = ledger.history("r1")
    assert read.money_usd == Decimal("8523.65")
    assert read.detail == {"cpu": 0.25, "count": 2, "nested": {"ok": True}}
    assert isinstance(read.detail["count"], int)


def test_request_item_holds_the_validated_request(aws: None) -> None:
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    request = parse_request(request_body(), now=NOW)
    ledger.record_request(request, actor="record_request")
    item = ledger.get(request.id, REQUEST)
    assert item is not None
    assert item["request"]["earliest_start"] == "2026-12-08T11:30:00Z"
    assert item["request"]["models"][0]["cpu_cores"] == 16


def test_a_state_written_unless_outcome_never_follows_the_outcome(aws: None) -> None:
    # AWAITING_APPROVAL must not land after CANCELLED (fault soak seed 1, lifecycle 176)
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    first = ledger.append("r1", State.AWAITING_APPROVAL, actor="notify", unless_outcome=True)
    assert first is not None
    assert first.sk == "STATE#2026-12-01T09:00:00.000Z#0000"
    ledger.append_outcome("r1", State.CANCELLED, actor="api")
    with pytest.raises(ReservationCancelled, match="r1 is CANCELLED: AWAITING_APPROVAL is not recorded"):
        ledger.append("r1", State.AWAITING_APPROVAL, actor="notify", unless_outcome=True)
    assert [e.state for e in ledger.history("r1")] == [State.AWAITING_APPROVAL, State.CANCELLED]


class ReplayingClient(RecordingClient):
    """Runs each transaction once more after it committed (``replay``: a botocore retry after a lost
    answer), or lets another writer take the sequence number just before it (``competitor``)."""

    def __init__(
        self, client: Any, *, replay: bool = False, competitor: dict[str, Any] | None = None
    ) -> None:
        super().__init__(client)
        self.replay = replay
        self.competitor = competitor

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.operations.append("transact_write_items")
        if self.competitor is not None:  # another writer, same millisecond, same sequence number
            self._client.put_item(TableName="ledger", Item=self.competitor)
            self.competitor = None
        answer = self._client.transact_write_items(**kwargs)
        if self.replay:
            self.replay = False
            return self._client.transact_write_items(**kwargs)  # the Put's condition now fails
        return answer


def test_a_retried_transaction_that_had_committed_counts_as_the_writer(aws: None) -> None:
    client = ReplayingClient(clients.dynamodb(REGION), replay=True)
    ledger = Ledger("ledger", client, clock=Clock())  # type: ignore[arg-type]
    entry = ledger.append("r1", State.AWAITING_APPROVAL, actor="notify", unless_outcome=True)
    assert entry is not None
    assert entry.sk == "STATE#2026-12-01T09:00:00.000Z#0000"
    assert [e.state for e in ledger.history("r1")] == [State.AWAITING_APPROVAL]
    assert set(client.operations) <= {"put_item", "get_item", "query", "transact_write_items"}


def test_a_sequence_number_taken_meanwhile_moves_the_transaction_to_the_next(aws: None) -> None:
    sk = "STATE#2026-12-01T09:00:00.000Z#0000"
    competitor = {
        "request_id": {"S": "r1"},
        "sk": {"S": sk},
        "state": {"S": "PLANNED"},
        "at": {"S": sk[6:30]},
    }
    client = ReplayingClient(clients.dynamodb(REGION), competitor=competitor)
    ledger = Ledger("ledger", client, clock=Clock())  # type: ignore[arg-type]
    entry = ledger.append("r1", State.AWAITING_APPROVAL, actor="notify", unless_outcome=True)
    assert entry is not None
    assert entry.sk == "STATE#2026-12-01T09:00:00.000Z#0001"
    assert [e.state for e in ledger.history("r1")] == [State.PLANNED, State.AWAITING_APPROVAL]


def test_an_outcome_whose_writer_died_before_its_entry_is_completed_by_the_step_it_stops(aws: None) -> None:
    # Given a DELETE that put the CANCELLED marker and died before its entry (soak seed 304 #133), after the
    # workflow put REQUEST and before REQUESTED
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    request = parse_request(request_body(request_id="r1"), now=NOW)
    ledger.put_once("r1", REQUEST, {"request": request.model_dump(mode="json"), "actor": "t"})
    ledger.put_once(
        "r1", OUTCOME, {"outcome": "CANCELLED", "actor": "alice", "detail": {"reason": "cancelled"}}
    )
    assert ledger.history("r1") == []
    # When the workflow's REQUESTED meets the marker
    with pytest.raises(ReservationCancelled):
        ledger.append("r1", State.REQUESTED, actor="record_request", unless_outcome=True)
    # Then the history says CANCELLED, by the DELETE's caller, once however often it is met
    assert ledger.complete_outcome("r1") is None
    (entry,) = ledger.history("r1")
    assert (entry.state, entry.actor, entry.detail) == (State.CANCELLED, "alice", {"reason": "cancelled"})


def test_an_outcome_marker_carries_its_entry_detail_and_money(aws: None) -> None:
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.append_outcome("r2", State.FAILED, actor="notify", detail={"reason": "x"}, money_usd=Decimal("-5"))
    marker = ledger.get("r2", OUTCOME)
    assert marker is not None
    assert (marker["detail"], marker["money_usd"]) == ({"reason": "x"}, "-5.00")


class ConflictingClient:
    """A DynamoDB client whose first ``TransactWriteItems`` is cancelled with ``TransactionConflict`` on
    its last action, as DynamoDB cancels one of two transactions writing one item at once (moto never
    does)."""

    def __init__(self, client: Any, conflicts: int) -> None:
        self._client = client
        self.conflicts = conflicts
        self.transactions = 0

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.transactions += 1
        if self.conflicts > 0:
            self.conflicts -= 1
            reasons = [{"Code": "None"} for _ in kwargs["TransactItems"][:-1]] + [
                {"Code": "TransactionConflict"}
            ]
            error: Any = {"Error": {"Code": "TransactionCanceledException", "Message": "conflict"}}
            error["CancellationReasons"] = reasons
            raise ClientError(error, "TransactWriteItems")
        return self._client.transact_write_items(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_state_whose_transaction_meets_a_concurrent_one_is_tried_again_whole(aws: None) -> None:
    # Given an append whose transaction DynamoDB cancels twice for a conflict on CURRENT
    client = ConflictingClient(clients.dynamodb(REGION), conflicts=2)
    ledger = Ledger("ledger", client, clock=Clock())  # type: ignore[arg-type]
    ledger.append("r1", State.REQUESTED, actor="test", unless_outcome=True)
    # Then the third try records the state and moves CURRENT with it (not the state alone)
    assert client.transactions == 3
    assert [e.state for e in ledger.history("r1")] == [State.REQUESTED]
    assert ledger.current_states(["r1"]) == {"r1": State.REQUESTED}
    current = ledger.get("r1", CURRENT)
    assert current is not None
    assert current["current_state"] == "REQUESTED"


class RefusingClient:
    """A DynamoDB client whose next ``PutItem`` meets an ongoing transaction on its item: DynamoDB refuses it
    with ``TransactionConflictException`` (nothing written)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.refusals = 1

    def put_item(self, **kwargs: Any) -> Any:
        if self.refusals > 0:
            self.refusals -= 1
            error: Any = {
                "Error": {
                    "Code": "TransactionConflictException",
                    "Message": "Transaction is ongoing for the item",
                },
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
            raise ClientError(error, "PutItem")
        return self._client.put_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_write_that_meets_an_ongoing_transaction_is_a_retryable_fault(aws: None) -> None:
    # Given a put that DynamoDB refuses because a transaction writes the same item at that moment (issue 29)
    client = RefusingClient(clients.dynamodb(REGION))
    ledger = Ledger("ledger", client, clock=Clock())  # type: ignore[arg-type]
    # When it is written, then the caller sees a transient fault (retried by its step), not a bare ClientError
    with pytest.raises(RetryableAwsError, match="TransactionConflictException"):
        ledger.put_once("r1", "PURCHASE_INTENT", {"actor": "test"})
    # And the retry writes it
    created, _ = ledger.put_once("r1", "PURCHASE_INTENT", {"actor": "test"})
    assert created


def test_an_outcome_that_meets_another_one_without_its_entry_completes_that_entry(aws: None) -> None:
    # Soak seed 602 #120: a DELETE wrote its CANCELLED marker and timed out before its entry; the workflow
    # then failed (no offering) and its FAILED met the marker: nothing was recorded, the ledger ended
    # REQUESTED.
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.append("r1", State.REQUESTED, actor="test")
    ledger.put_once(
        "r1", OUTCOME, {"outcome": "CANCELLED", "actor": "alice", "detail": {"reason": "cancelled"}}
    )
    assert (
        ledger.append_outcome("r1", State.FAILED, actor="notify", detail={"error": "OfferingNotFound"})
        is None
    )
    assert [e.state for e in ledger.history("r1")] == [State.REQUESTED, State.CANCELLED]
    assert ledger.history("r1")[-1].actor == "alice"
