"""The lifecycle's table (capacity/lifecycle.py): what may follow what, decided once for every writer.

- the table's answers for the races that lost money (each a real example of the class);
- a stateful property test (hypothesis ``RuleBasedStateMachine``): several writers record events in random
  interleavings, duplicated and reordered, through the real ledger on moto (DynamoDB's conditional
  transactions), some from a snapshot read before another writer moved it; after every step the history
  is a path of the table, no fee is recorded after the release began, one outcome at most, the release
  never began while money was in flight, and ``CURRENT`` is what the history says;
- the state diagram in docs/architecture.md is the one the table generates.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from capacity.adapters import clients
from capacity.errors import MoneyInFlight, ReservationCancelled, TransitionRefused
from capacity.ledger import Ledger, _Entry, _Lost, snapshot_of
from capacity.lifecycle import (
    OUTCOMES,
    PURCHASE_KEY,
    RULES,
    Event,
    Snapshot,
    decide,
    extension_key,
    mermaid,
    replay,
)
from capacity.records import State
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from moto import mock_aws

from tests.unit.conftest import REGION, create_tables
from tests.unit.unit_fakes import Clock

ROOT = Path(__file__).resolve().parents[2]


def at(phase: State | None, *, outcome: State | None = None, paying: str | None = None) -> Snapshot:
    """A snapshot in ``phase`` (with ``outcome``, and money in flight under ``paying``)."""
    in_flight = frozenset({paying}) if paying else frozenset()
    return Snapshot(phase=phase, outcome=outcome, in_flight=in_flight, version=3, state=outcome or phase)


# --------------------------------------------------------------------------------------------- the table


@pytest.mark.parametrize(
    ("snapshot", "event", "key", "action"),
    [
        # forward moves, in order only
        (at(None), Event.REQUEST, None, "apply"),
        (at(State.REQUESTED), Event.ACTIVATE, None, "refuse"),  # not bought: never "active"
        (at(State.PURCHASED), Event.DEPLOY, None, "refuse"),  # deployed only on an active reservation
        (at(State.PURCHASED), Event.PLAN, None, "skip"),  # a late PLANNED: behind, done already
        (at(State.READY), Event.SERVE, None, "skip"),  # a retried step
        # after an outcome nothing moves forward; the release may follow
        (at(State.PLANNED, outcome=State.CANCELLED), Event.ASK_APPROVAL, None, "refuse"),
        (at(State.DEPLOYING, outcome=State.CANCELLED), Event.SERVE, None, "refuse"),
        (at(State.READY, outcome=State.CANCELLED), Event.START_RELEASE, None, "apply"),
        (at(State.PLANNED, outcome=State.REJECTED), Event.CANCEL, None, "skip"),  # one outcome
        # once the release began: no outcome, nothing forward, no new money
        (at(State.RELEASING), Event.FAIL, None, "skip"),
        (at(State.RELEASING), Event.SERVE, None, "refuse"),
        (at(State.RELEASING), Event.MONEY_CALL, extension_key("x"), "refuse"),
        (at(State.RELEASED), Event.START_RELEASE, None, "skip"),
        # money in flight
        (at(State.PLANNED, outcome=State.CANCELLED), Event.MONEY_CALL, PURCHASE_KEY, "refuse"),
        (at(State.READY, paying="extension:x"), Event.START_RELEASE, None, "refuse"),
        (
            at(State.PLANNED, outcome=State.CANCELLED, paying=PURCHASE_KEY),
            Event.PURCHASE,
            None,
            "apply",
        ),
        (
            at(State.PLANNED, outcome=State.CANCELLED),
            Event.PURCHASE,
            None,
            "refuse",
        ),  # no money was in flight
        (
            at(State.READY, outcome=State.FAILED, paying="extension:x"),
            Event.EXTEND,
            "extension:x",
            "apply",
        ),
        (at(State.READY), Event.EXTEND, "extension:y", "skip"),  # recorded already (or never called)
        (at(State.READY), Event.MONEY_SETTLED, "extension:y", "skip"),
    ],
)
def test_the_table_answers(snapshot: Snapshot, event: Event, key: str | None, action: str) -> None:
    assert decide(snapshot, event, key=key).action == action


def test_money_that_lands_after_a_cancel_is_recorded_and_then_the_release_may_begin() -> None:
    cancelled = decide(at(State.PLANNED, paying=PURCHASE_KEY), Event.CANCEL).after
    assert decide(cancelled, Event.START_RELEASE).waits_for_money  # the release waits for the purchase
    paid = decide(cancelled, Event.PURCHASE)
    assert (paid.action, paid.after.phase, paid.after.outcome) == ("apply", State.PURCHASED, State.CANCELLED)
    assert paid.after.in_flight == frozenset()
    assert decide(paid.after, Event.START_RELEASE).action == "apply"


def test_replay_names_a_history_that_is_not_a_path() -> None:
    good: list[tuple[State, dict[str, object]]] = [
        (State.REQUESTED, {}),
        (State.PLANNED, {}),
        (State.PURCHASED, {}),
        (State.CANCELLED, {}),
    ]
    good += [(State.RELEASING, {}), (State.FAILED, {"phase": "release"}), (State.RELEASED, {})]
    assert replay(good) == []
    bad: list[tuple[State, dict[str, object]]] = [
        (State.REQUESTED, {}),
        (State.READY, {}),
        (State.RELEASING, {}),
        (State.EXTENDED, {}),
    ]
    problems = replay(bad)
    assert [p.split(" ", 1)[0] for p in problems] == ["#1", "#3"], problems


def test_every_event_has_one_rule_and_every_state_is_recorded_by_one() -> None:
    assert set(RULES) == set(Event)
    recorded = {rule.records for rule in RULES.values() if rule.records is not None}
    assert recorded == set(State)


def test_the_diagram_in_the_docs_is_the_one_the_table_generates() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    committed = text.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert committed == mermaid(), (
        "regenerate: python -c 'from capacity.lifecycle import mermaid; print(mermaid())'"
    )


# ------------------------------------------------------------------------------------ the ledger's writes


@pytest.fixture
def ledger(aws: None) -> Ledger:
    return Ledger("ledger", clients.dynamodb(REGION), clock=Clock())


def test_a_refused_change_raises_its_named_error_and_writes_nothing(ledger: Ledger) -> None:
    ledger.record("r1", Event.REQUEST, actor="record_request")
    with pytest.raises(TransitionRefused, match="activate may not follow REQUESTED"):
        ledger.record("r1", Event.ACTIVATE, actor="wait_for_activation")
    ledger.record("r1", Event.PLAN, actor="choose")
    ledger.record("r1", Event.MONEY_CALL, actor="purchase", key=PURCHASE_KEY)
    ledger.record("r1", Event.CANCEL, actor="alice")
    with pytest.raises(MoneyInFlight):
        ledger.record("r1", Event.START_RELEASE, actor="release")
    with pytest.raises(ReservationCancelled, match="r1 is CANCELLED: AWAITING_APPROVAL is not recorded"):
        ledger.record("r1", Event.ASK_APPROVAL, actor="notify")
    assert [e.state for e in ledger.history("r1")] == [State.REQUESTED, State.PLANNED, State.CANCELLED]
    snapshot = ledger.snapshot("r1")
    assert (snapshot.phase, snapshot.outcome, snapshot.in_flight) == (
        State.PLANNED,
        State.CANCELLED,
        frozenset({PURCHASE_KEY}),
    )


def test_two_writers_from_one_snapshot_cannot_both_win(ledger: Ledger) -> None:
    # Given a reservation ready to serve, and two writers that read it at once: a cancel and the release
    ledger.record("r1", Event.REQUEST, actor="record_request")
    ledger.record("r1", Event.PLAN, actor="choose")
    ledger.record("r1", Event.PURCHASE, actor="purchase", money_usd=Decimal(100))
    read = ledger.snapshot("r1")
    # When the cancel commits first
    ledger.record("r1", Event.CANCEL, actor="alice")
    # Then a write decided from the snapshot read before it loses the condition on the version
    verdict = decide(read, Event.FAIL)
    with pytest.raises(_Lost):
        ledger._commit("r1", read, verdict, _Entry("notify", {}, None), None)
    # and, decided again from the new snapshot, it is skipped (one outcome)
    assert ledger.record("r1", Event.FAIL, actor="notify") is None
    assert [e.state for e in ledger.history("r1")][-1] is State.CANCELLED


# ------------------------------------------------------------------------- random interleavings (stateful)

WRITERS = ("api", "reserve", "extend", "release", "rollover", "notify")
EVENTS = [e for e in Event if e not in (Event.MONEY_CALL, Event.MONEY_SETTLED)]
KEYS = (PURCHASE_KEY, extension_key("a"), extension_key("b"))
FEES = {Event.PURCHASE: Decimal("1990.60"), Event.EXTEND: Decimal("764.25")}


class Writers(RuleBasedStateMachine):
    """Writers of one reservation, each recording what it believes is next, from a snapshot it may have read
    long before (a slow Lambda, a late or repeated delivery), through the real ledger."""

    def __init__(self) -> None:
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        create_tables()
        self.clock = Clock()
        self.ledger = Ledger("ledger", clients.dynamodb(REGION), clock=self.clock)
        self.stale: list[Snapshot] = [Snapshot()]
        self.released_while_in_flight = False

    def teardown(self) -> None:
        self.mock.stop()

    def _record(self, event: Event, key: str | None, writer: str) -> None:
        before = self.ledger.snapshot("r")
        detail = {"phase": "release"} if event is Event.RELEASE_FAIL else {}
        try:
            entry = self.ledger.record(
                "r", event, actor=writer, key=key, money_usd=FEES.get(event), detail=detail
            )
        except (ReservationCancelled, TransitionRefused, MoneyInFlight):
            return
        after = self.ledger.snapshot("r")
        if event is Event.START_RELEASE and entry is not None and before.in_flight:
            self.released_while_in_flight = True
        self.stale.append(after)

    @rule(event=st.sampled_from(EVENTS), key=st.sampled_from(KEYS), writer=st.sampled_from(WRITERS))
    def record(self, event: Event, key: str, writer: str) -> None:
        self.clock.advance(seconds=1)
        self._record(event, key if event is Event.EXTEND else None, writer)

    @rule(key=st.sampled_from(KEYS), writer=st.sampled_from(WRITERS), settle=st.booleans())
    def money(self, key: str, writer: str, settle: bool) -> None:
        self._record(Event.MONEY_SETTLED if settle else Event.MONEY_CALL, key, writer)

    @rule(event=st.sampled_from(EVENTS), index=st.integers(min_value=0, max_value=50))
    def late_writer(self, event: Event, index: int) -> None:
        """A writer that decided from an old snapshot: its conditional write must lose, whatever it is."""
        stale = self.stale[index % len(self.stale)]
        current = self.ledger.snapshot("r")
        verdict = decide(stale, event, key=extension_key("a") if event is Event.EXTEND else None)
        if verdict.action != "apply" or stale.version == current.version:
            return
        with pytest.raises(_Lost):
            self.ledger._commit("r", stale, verdict, _Entry("late", {}, None), None)

    @invariant()
    def history_is_a_path_of_the_table(self) -> None:
        history = self.ledger.history("r")
        assert replay([(e.state, e.detail) for e in history]) == []
        snapshot = self.ledger.snapshot("r")
        derived = snapshot_of(history)
        assert (snapshot.phase, snapshot.outcome, snapshot.state) == (
            derived.phase,
            derived.outcome,
            derived.state,
        )
        assert snapshot.version >= len(history)

    @invariant()
    def no_fee_after_the_release_began_and_one_outcome(self) -> None:
        states = [e.state for e in self.ledger.history("r")]
        if State.RELEASING in states:
            after = states[states.index(State.RELEASING) :]
            assert State.EXTENDED not in after, states
            assert State.PURCHASED not in after, states
        outcomes = [
            e for e in self.ledger.history("r") if e.state in OUTCOMES and e.detail.get("phase") != "release"
        ]
        assert len(outcomes) <= 1
        assert not self.released_while_in_flight


TestWriters = Writers.TestCase
TestWriters.settings = settings(
    max_examples=30,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
