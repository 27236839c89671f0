"""The costs rollup (issue 31): written in the transaction of each entry that carries money, equal to the
ledger's sums, and what GET /costs reads (the same figures as reading every reservation's ledger)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity import cost_rollup
from capacity.ledger import history_of
from capacity.lifecycle import Event, extension_key
from capacity.logic.governance.cost_reconcile import reconcile
from capacity.logic.governance.costs import cost_report, ledger_report, record_usage, reservation_spend
from capacity.record_kinds import PURCHASE, PURCHASE_VOIDED
from capacity.request import parse_request

from tests.unit.conftest import Harness
from tests.unit.unit_fakes import NOW, request_body

START = NOW + timedelta(days=7)


def _bought(
    harness: Harness,
    rid: str,
    *,
    fee: str = "1990.60",
    team: str = "ml-eval",
    market: str = "reserved",
    **more: Any,
) -> None:
    """REQUEST, PLANNED and PURCHASED (with its PURCHASE item) through the ledger's own writes."""
    ledger = harness.ledger
    ledger.record_request(parse_request(request_body(request_id=rid, team=team), now=NOW), actor="t")
    ledger.record(rid, Event.PLAN, actor="t")
    ledger.record(rid, Event.MONEY_CALL, actor="t", key="purchase")
    ledger.put_once(
        rid,
        PURCHASE,
        {
            "training_plan_arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-plan/{rid}",
            "training_plan_name": rid,
            "region": "us-east-1",
            "start_time": START.isoformat(),
            "end_time": (START + timedelta(hours=72)).isoformat(),
            "upfront_fee_usd": fee,
            "instance_type": "ml.p5.48xlarge",
            "instance_count": 2,
            "market": market,
            **more,
        },
    )
    ledger.record(rid, Event.PURCHASE, actor="t", money_usd=Decimal(fee), detail={"region": "us-east-1"})


def _served_and_released(harness: Harness, rid: str, hours: int, instances: int) -> None:
    ledger = harness.ledger
    harness.clock.now = START
    for event in (Event.ACTIVATE, Event.DEPLOY, Event.SERVE):
        ledger.record(rid, event, actor="t")
    record_usage(harness.ports, rid, instances, source="ready")
    harness.clock.now = START + timedelta(hours=hours)
    ledger.record(rid, Event.START_RELEASE, actor="t")
    spend = reservation_spend(harness.ports, rid)
    ledger.record(rid, Event.FINISH_RELEASE, actor="t", spend=spend)


def _entries_sum(harness: Harness, rid: str) -> Decimal:
    history = history_of(harness.ledger.items(rid))
    return sum((e.money_usd for e in history if e.money_usd is not None), Decimal(0))


def _line(harness: Harness, rid: str, team: str = "ml-eval", month: str = "2026-12") -> dict[str, Any]:
    item = harness.ledger.rollup.get(cost_rollup.partition(team, month), cost_rollup.LINE + rid)
    assert item is not None
    return item


def _cell(harness: Harness, team: str = "ml-eval", month: str = "2026-12") -> dict[str, Any]:
    total = harness.ledger.rollup.get(cost_rollup.partition(team, month), cost_rollup.TOTAL)
    assert total is not None
    return dict(total["cells"][cost_rollup.cell_key("ml.p5.48xlarge", "us-east-1")])


def _same_report(harness: Harness, **query: Any) -> None:
    fast, slow = cost_report(harness.ports, **query), ledger_report(harness.ports, **query)
    fast.pop("next_token")
    assert fast == slow


def test_a_purchase_writes_the_rollup_in_its_transaction(harness: Harness) -> None:
    _bought(harness, "r1")
    assert Decimal(_line(harness, "r1")["money_usd"]) == _entries_sum(harness, "r1") == Decimal("1990.60")
    cell = _cell(harness)
    assert (cell["reservations"], Decimal(cell["paid_usd"])) == (1, Decimal("1990.60"))
    assert harness.ledger.rollup.team_months() == [("ml-eval", "2026-12")]
    assert harness.ledger.get("r1", cost_rollup.POINTER) is not None
    _same_report(harness)


def test_extensions_add_to_the_purchase_month_and_a_release_closes_it(harness: Harness) -> None:
    _bought(harness, "r1")
    harness.clock.now = NOW + timedelta(days=1)
    harness.ledger.record("r1", Event.MONEY_CALL, actor="t", key=extension_key("x1"))
    harness.ledger.record(
        "r1",
        Event.EXTEND,
        actor="t",
        key=extension_key("x1"),
        money_usd=Decimal("500.25"),
        detail={"extension_id": "x1", "end_time": (START + timedelta(hours=96)).isoformat()},
    )
    assert Decimal(_line(harness, "r1")["money_usd"]) == _entries_sum(harness, "r1") == Decimal("2490.85")
    _same_report(harness)
    _served_and_released(harness, "r1", hours=48, instances=1)
    cell = _cell(harness)
    assert Decimal(cell["paid_usd"]) == Decimal("2490.85")
    assert Decimal(cell["used_instance_hours"]) == Decimal("48.00")
    assert Decimal(cell["reserved_instance_hours"]) == Decimal("192.00")
    total = harness.ledger.rollup.get(cost_rollup.partition("ml-eval", "2026-12"), cost_rollup.TOTAL)
    assert total is not None
    assert total["open"] == {}
    _same_report(harness)
    _same_report(harness, group_by="region")
    _same_report(harness, team="ml-eval", month="2026-12", group_by="instance_type")


def test_a_refund_is_negative_money_and_brings_the_month_back_to_zero(harness: Harness) -> None:
    _bought(harness, "r1")
    harness.ledger.put_once("r1", PURCHASE_VOIDED, {"upfront_fee_usd": "1990.60", "status": "Failed"})
    harness.ledger.record("r1", Event.FAIL, actor="t", money_usd=Decimal("-1990.60"), detail={"error": "x"})
    assert Decimal(_line(harness, "r1")["money_usd"]) == _entries_sum(harness, "r1") == 0
    assert Decimal(_cell(harness)["paid_usd"]) == 0
    _same_report(harness)


def test_on_demand_pays_what_ran_once_released(harness: Harness) -> None:
    _bought(harness, "od", fee="0", market="on-demand")
    _served_and_released(harness, "od", hours=10, instances=2)
    spend = reservation_spend(harness.ports, "od")
    assert spend is not None
    assert Decimal(spend["paid_usd"]) > 0
    assert Decimal(_cell(harness)["paid_usd"]) == Decimal(spend["paid_usd"])  # the settled cost, not $0
    assert Decimal(_line(harness, "od")["money_usd"]) == _entries_sum(harness, "od") == 0
    _same_report(harness)


def test_an_open_reservation_is_read_as_it_stands_now(harness: Harness) -> None:
    _bought(harness, "r1")
    harness.clock.now = START
    for event in (Event.ACTIVATE, Event.DEPLOY, Event.SERVE):
        harness.ledger.record("r1", event, actor="t")
    record_usage(harness.ports, "r1", 2, source="ready")
    harness.clock.now = START + timedelta(hours=5)
    report = cost_report(harness.ports)
    assert report["totals"]["used_instance_hours"] == "10.00"
    _same_report(harness)


def test_two_teams_and_months_rows_totals_and_pages(harness: Harness) -> None:
    for index in range(5):
        _bought(harness, f"a{index}", team="ml-eval", fee="100")
    harness.clock.now = NOW + timedelta(days=35)  # January
    for index in range(3):
        _bought(harness, f"b{index}", team="ml-platform", fee="10.5")
    _same_report(harness)
    _same_report(harness, month="2027-01")
    _same_report(harness, team="ml-eval")
    first = cost_report(harness.ports, limit=3)
    assert [line["request_id"] for line in first["reservations"]] == ["a0", "a1", "a2"]
    second = cost_report(harness.ports, limit=3, next_token=first["next_token"])
    assert [line["request_id"] for line in second["reservations"]] == ["a3", "a4", "b0"]
    third = cost_report(harness.ports, limit=3, next_token=second["next_token"])
    assert [line["request_id"] for line in third["reservations"]] == ["b1", "b2"]
    assert third["next_token"] is None
    assert first["totals"]["reservations"] == 8
    with pytest.raises(ValueError, match="next_token"):
        cost_report(harness.ports, next_token="bm90IGEgdG9rZW4=")


def test_the_reconciliation_finds_nothing_then_finds_and_fixes_a_drift(harness: Harness) -> None:
    _bought(harness, "r1")
    _served_and_released(harness, "r1", hours=24, instances=2)
    _bought(harness, "r2", fee="42")
    assert reconcile(harness.ports)["differences"] == []
    pk = cost_rollup.partition("ml-eval", "2026-12")
    total = harness.ledger.rollup.get(pk, cost_rollup.TOTAL)
    assert total is not None
    drifted = {**total, "cells": {k: {**v, "paid_usd": "1"} for k, v in total["cells"].items()}}
    assert harness.ledger.rollup.replace(drifted, total) == 1
    found = reconcile(harness.ports, fix=True)
    assert len(found["differences"]) == 1
    assert found["fixed"] == 1
    assert reconcile(harness.ports)["differences"] == []
    _same_report(harness)
