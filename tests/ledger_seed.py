"""Ledger fixtures for tests: a state entry written as it stands, outside the lifecycle's table.

The product records every change through :meth:`capacity.ledger.Ledger.record` (the table decides). A test
that only needs a reservation *in* some state (a listing, a cost summary, a door's answer) writes it here
instead of driving every step: the entry is put as given and the ``CURRENT`` snapshot follows it
(:func:`capacity.ledger.snapshot_of` of the history), so the product's next transition is decided from it.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from decimal import Decimal
from typing import Any

from capacity.adapters.dynamodb import serialize_item
from capacity.ledger import Ledger, snapshot_of
from capacity.lifecycle import OUTCOMES, Snapshot
from capacity.pricing import money_str
from capacity.record_kinds import CURRENT, OUTCOME, STATE_PREFIX
from capacity.records import LedgerEntry, State
from capacity.timeutil import iso_ms


def seed(
    ledger: Ledger,
    request_id: str,
    state: State,
    *,
    actor: str = "tests",
    detail: dict[str, Any] | None = None,
    money_usd: Decimal | None = None,
) -> LedgerEntry:
    """Put the entry ``state`` (now, by ``ledger``'s clock) after the reservation's last one, move ``CURRENT``
    to the snapshot its history leads to (money in flight kept) and, for an outcome, put the ``OUTCOME``
    marker. Returns the entry."""
    before = ledger.snapshot(request_id)
    sk = _next_sk(before, iso_ms(ledger._clock()))
    attributes: dict[str, Any] = {
        "state": state.value,
        "at": sk[6:30],
        "actor": actor,
        "detail": detail or {},
    }
    if money_usd is not None:
        attributes["money_usd"] = money_str(money_usd)
    created, _ = ledger.put_once(request_id, sk, attributes)
    assert created, sk
    if state in OUTCOMES and (detail or {}).get("phase") != "release":
        ledger.put_once(request_id, OUTCOME, {"outcome": state.value, "actor": actor, "detail": detail or {}})
    history = ledger.history(request_id)
    after = replace(snapshot_of(history), in_flight=before.in_flight, version=before.version + 1)
    _put_current(ledger, request_id, after)
    return history[-1]


def seed_all(ledger: Ledger, request_id: str, *states: State, actor: str = "tests") -> None:
    """:func:`seed` each of ``states`` in order."""
    for state in states:
        seed(ledger, request_id, state, actor=actor)


def _next_sk(before: Snapshot, now: str) -> str:
    last = before.state_sk
    if last and last[len(STATE_PREFIX) :].split("#")[0] >= now:
        at, seq = last[len(STATE_PREFIX) :].split("#")
        return f"{STATE_PREFIX}{at}#{int(seq) + 1:04d}"
    return f"{STATE_PREFIX}{now}#0000"


def _put_current(ledger: Ledger, request_id: str, snapshot: Snapshot) -> None:
    item = {
        "request_id": request_id,
        "sk": CURRENT,
        "current_state": snapshot.state.value if snapshot.state else None,
        "state_sk": snapshot.state_sk,
        "phase": snapshot.phase.value if snapshot.phase else None,
        "outcome": snapshot.outcome.value if snapshot.outcome else None,
        "in_flight": sorted(snapshot.in_flight),
        "version": snapshot.version,
        "write_id": uuid.uuid4().hex,
        "written_at": snapshot.state_sk[6:30] if snapshot.state_sk else "",
    }
    ledger._client.put_item(TableName=ledger._table, Item=serialize_item(item))
