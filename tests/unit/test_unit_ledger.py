"""The ledger is append-only, conditional and ordered (moto DynamoDB)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from capacity.adapters import clients
from capacity.errors import ReservationCancelled, RetryableAwsError
from capacity.ledger import Ledger
from capacity.lifecycle import Event
from capacity.record_kinds import CURRENT, OUTCOME, PURCHASE_INTENT, REQUEST, STATE_PREFIX
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
    # When three states are recorded at the same instant
    for event in (Event.REQUEST, Event.PLAN, Event.PURCHASE):
        ledger.record("r1", event, actor="test")
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
    # Given two reservations, one planned then bought five minutes later
    clock = Clock()
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=clock)
    ledger.record("r1", Event.REQUEST, actor="test")
    ledger.record("r2", Event.REQUEST, actor="test")
    ledger.record("r1", Event.PLAN, actor="test")
    clock.advance(minutes=5)
    ledger.record("r1", Event.PURCHASE, actor="test")
    # When a late PLANNED arrives from a writer whose clock is behind, and a state from another one
    clock.advance(minutes=-3)
    assert ledger.record("r1", Event.PLAN, actor="late") is None  # behind PURCHASED: skipped
    ledger.record("r1", Event.SCHEDULE, actor="behind")
    # Then nothing moved back: the late write is not recorded, and a clock behind records after the last
    assert [e.state for e in ledger.history("r1")] == [
        State.REQUESTED,
        State.PLANNED,
        State.PURCHASED,
        State.SCHEDULED,
    ]
    assert ledger.current_states(["r1", "r2", "r-none"]) == {"r1": State.SCHEDULED, "r2": State.REQUESTED}
    current = ledger.get("r1", CURRENT)
    assert current is not None
    assert current["state_sk"] == "STATE#2026-12-01T09:05:00.000Z#0001"
    assert (current["phase"], current["version"]) == ("SCHEDULED", 4)


def test_current_states_reads_a_page_in_one_call_and_older_reservations_from_their_history(aws: None) -> None:
    # Given a reservation recorded before CURRENT existed (its state item only) and two with CURRENT
    recorder = RecordingClient(clients.dynamodb(REGION))
    ledger = Ledger("ledger", recorder, clock=Clock())  # type: ignore[arg-type]
    ledger.record("new-1", Event.REQUEST, actor="test")
    ledger.record("new-2", Event.CANCEL, actor="test")
    ledger.put_once(
        "old",
        "STATE#2026-11-01T09:00:00.000Z#0000",
        {"state": "RELEASED", "at": "2026-11-01T09:00:00.000Z", "actor": "a"},
    )
    recorder.operations.clear()
    # When their states are read for a listing page
    states = ledger.current_states(["new-1", "new-2", "old"])
    # Then one BatchGetItem answers the two, and the old one is read from its history
    assert states == {"new-1": State.REQUESTED, "new-2": State.CANCELLED, "old": State.RELEASED}
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
    ledger.record(request.id, Event.PLAN, actor="a")
    clock.advance(seconds=1)
    assert ledger.record(request.id, Event.PLAN, actor="a") is None  # a retried step: done already
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
    ledger.record("r1", Event.REQUEST, actor="record_request")
    entry = ledger.record(
        "r1",
        Event.PURCHASE,
        actor="purchase",
        detail={"cpu": 0.25, "count": 2, "nested": {"ok": True}},
        money_usd=Decimal("8523.654"),
    )
    assert entry is not None
    (item,) = [i for i in raw_items() if i["sk"]["S"].startswith(STATE_PREFIX) and "money_usd" in i]
    assert item["money_usd"] == {"S": "8523.65"}
    (_, read) = ledger.history("r1")
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
    ledger.record("r1", Event.REQUEST, actor="record_request")
    first = ledger.record("r1", Event.PLAN, actor="choose")
    assert first is not None
    assert first.sk == "STATE#2026-12-01T09:00:00.000Z#0001"
    ledger.record("r1", Event.CANCEL, actor="api")
    with pytest.raises(ReservationCancelled, match="r1 is CANCELLED: AWAITING_APPROVAL is not recorded"):
        ledger.record("r1", Event.ASK_APPROVAL, actor="notify")
    assert [e.state for e in ledger.history("r1")] == [State.REQUESTED, State.PLANNED, State.CANCELLED]


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
    entry = ledger.record("r1", Event.REQUEST, actor="record_request")
    assert entry is not None
    assert entry.sk == "STATE#2026-12-01T09:00:00.000Z#0000"
    assert [e.state for e in ledger.history("r1")] == [State.REQUESTED]
    assert set(client.operations) <= {"put_item", "get_item", "query", "transact_write_items"}


def test_a_sequence_number_taken_meanwhile_moves_the_transaction_to_the_next(aws: None) -> None:
    # Given a request recorded, and an item written outside the protocol under the next entry's key
    sk = "STATE#2026-12-01T09:00:00.000Z#0001"
    competitor = {
        "request_id": {"S": "r1"},
        "sk": {"S": sk},
        "state": {"S": "SEARCHING"},
        "at": {"S": sk[6:30]},
    }
    client = ReplayingClient(clients.dynamodb(REGION))
    ledger = Ledger("ledger", client, clock=Clock())  # type: ignore[arg-type]
    ledger.record("r1", Event.REQUEST, actor="record_request")
    client.competitor = competitor
    # When the next state is recorded in the same millisecond
    entry = ledger.record("r1", Event.PLAN, actor="choose")
    # Then it takes the next free key, and nothing is overwritten
    assert entry is not None
    assert entry.sk == "STATE#2026-12-01T09:00:00.000Z#0002"
    assert [e.state for e in ledger.history("r1")] == [State.REQUESTED, State.SEARCHING, State.PLANNED]


def test_an_outcome_and_its_entry_are_one_write(aws: None) -> None:
    # Given a request, and a DELETE whose transaction DynamoDB refuses (nothing of it may stand alone)
    client = ConflictingClient(clients.dynamodb(REGION), conflicts=0)
    ledger = Ledger("ledger", client, clock=Clock())  # type: ignore[arg-type]
    ledger.record("r1", Event.REQUEST, actor="record_request")
    # When the cancel is recorded
    ledger.record("r1", Event.CANCEL, actor="alice", detail={"reason": "cancelled"})
    # Then the marker, the entry and CURRENT went in one transaction: REQUESTED is refused after it
    marker = ledger.get("r1", OUTCOME)
    assert marker is not None
    assert marker["outcome"] == "CANCELLED"
    (_, entry) = ledger.history("r1")
    assert (entry.state, entry.actor, entry.detail) == (State.CANCELLED, "alice", {"reason": "cancelled"})
    assert client.transactions == 2
    assert ledger.snapshot("r1").outcome is State.CANCELLED


def test_an_outcome_marker_carries_its_entry_detail_and_money(aws: None) -> None:
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record("r2", Event.FAIL, actor="notify", detail={"reason": "x"}, money_usd=Decimal("-5"))
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
    ledger.record("r1", Event.REQUEST, actor="test")
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


def test_an_outcome_that_meets_another_one_is_skipped_and_the_first_has_its_entry(aws: None) -> None:
    # Soak seed 602 #120 (before the lifecycle): a DELETE wrote its CANCELLED marker and timed out before its
    # entry; the workflow's FAILED then met the marker and the ledger ended REQUESTED. The marker and the
    # entry are now one transaction: the first outcome has its entry, the second one is skipped.
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record("r1", Event.REQUEST, actor="test")
    ledger.record("r1", Event.CANCEL, actor="alice", detail={"reason": "cancelled"})
    assert ledger.record("r1", Event.FAIL, actor="notify", detail={"error": "OfferingNotFound"}) is None
    assert [e.state for e in ledger.history("r1")] == [State.REQUESTED, State.CANCELLED]
    assert ledger.history("r1")[-1].actor == "alice"
    outcome = ledger.get("r1", OUTCOME)
    assert outcome is not None
    assert outcome["outcome"] == "CANCELLED"
