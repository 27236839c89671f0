"""A stale extension offering's replacement (logic/continuity/extend.py ``_buy``): which one is bought, and
what the chain's budget counts for it afterwards (``extension_spend``, read by later extensions and the
roll-over)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.errors import BudgetExceeded
from capacity.events import ExtensionRequestedDetail
from capacity.logic.continuity.extend import (
    ExtendInput,
    extend_capacity,
    extension_spend,
    fees_in_flight,
    require_extension_allowed,
)
from capacity.logic.steps.common import load_request
from capacity.offerings import ExtensionOffering
from capacity.record_kinds import EXTENSION, EXTENSION_CALL, EXTENSION_INTENT
from capacity.resources import Extension

from tests.unit.conftest import Harness
from tests.unit.test_unit_steps import bought
from tests.unit.unit_fakes import WINDOW_START

PLAN_END = WINDOW_START + timedelta(days=4)  # the fake's plan: 2026-12-09 11:30 for 72 h


def extension(offering_id: str, fee: str) -> Extension:
    return Extension(
        offering_id=offering_id,
        start_time=PLAN_END,
        end_time=PLAN_END + timedelta(hours=24),
        duration_hours=24,
        upfront_fee_usd=Decimal(fee),
        availability_zone="us-east-1a",
        status="offered",
    )


def stale_then(h: Harness, *fresh: Extension, stale_fee: str = "1000", **overrides: Any) -> str:
    """A bought plan (fee $8,000) whose person chose ``tpeo-stale`` (``stale_fee``), which expired before
    the call; a fresh search finds ``fresh``. The extension bought: the request id."""
    request = bought(h, **overrides)
    h.world.plan_extensions = [extension("tpeo-stale", stale_fee), *fresh]
    chosen = ExtensionOffering(
        offering_id="tpeo-stale",
        region="us-east-1",
        start_time=PLAN_END,
        end_time=PLAN_END + timedelta(hours=24),
        duration_hours=24,
        upfront_fee_usd=Decimal(stale_fee),
    )
    h.world.expired_ids.add("tpeo-stale")
    detail = ExtensionRequestedDetail(
        request_id=request.id, extension_id="tpeo-stale", offering=chosen, requester="alice@example.com"
    )
    out = extend_capacity(ExtendInput(detail=detail, execution="exec-1"), h.ports)
    assert out.status == "bought"
    return request.id


def test_the_chain_budget_counts_the_replacement_fee_not_the_stale_offering_fee(harness: Harness) -> None:
    """Defect 1: the replacement costs more than the stale offering (allowed under the threshold); the
    committed spend is the purchase plus the fee actually paid."""
    request_id = stale_then(harness, extension("tpeo-fresh", "1500"), approval_above_usd="5000")
    record = harness.ledger.get(request_id, f"{EXTENSION}#tpeo-stale")
    assert record is not None
    assert record["offering_id"] == "tpeo-fresh"
    assert extension_spend(harness.ports, request_id) == Decimal("9500")  # 8,000 + 1,500, not + 1,000


def test_a_stale_extension_is_replaced_by_the_cheapest_fresh_offering(harness: Harness) -> None:
    """Defect 2: the fresh search lists a dearer offering first; the cheapest fits the budget, the first
    does not ($8,000 + $1,200 > $9,100): the cheapest is bought, not a refusal."""
    request_id = stale_then(
        harness,
        extension("tpeo-dear", "1200"),
        extension("tpeo-cheap", "900"),
        approval_above_usd="5000",
        max_upfront_fee_usd="9100",
    )
    assert [e.offering_id for e in harness.world.extension_history] == ["tpeo-cheap"]
    assert extension_spend(harness.ports, request_id) == Decimal("8900")


def test_a_later_extension_is_judged_with_the_replacement_fee(harness: Harness) -> None:
    """What defect 1 cost: $8,000 + $1,500 bought; a second $1,000 day is above the $10,000 budget (it fitted
    when the first extension was counted at the stale $1,000), and a cancel names the $1,500 in flight."""
    request_id = stale_then(
        harness, extension("tpeo-fresh", "1500"), approval_above_usd="5000", max_upfront_fee_usd="10000"
    )
    assert fees_in_flight(harness.ports, request_id) == [("tpeo-stale", Decimal("1500"))]
    second = ExtensionOffering(
        offering_id="tpeo-second",
        region="us-east-1",
        start_time=PLAN_END + timedelta(hours=24),
        end_time=PLAN_END + timedelta(hours=48),
        duration_hours=24,
        upfront_fee_usd=Decimal("1000"),
    )
    request = load_request(harness.ports, request_id)
    with pytest.raises(BudgetExceeded, match=r"\$9,500.00 already committed"):
        require_extension_allowed(request, harness.ports, second, extension_id="tpeo-second")


def test_a_replacement_called_but_not_yet_recorded_counts_its_fee(harness: Harness) -> None:
    """A Lambda killed after the replacement's call, before ``EXTENSION#``: the call's fee is counted."""
    request = bought(harness)
    fee = {"offering_id": "tpeo-stale", "upfront_fee_usd": "1000"}
    harness.ledger.put_once(request.id, f"{EXTENSION_INTENT}#tpeo-stale", {"actor": "t", "offering": fee})
    for at, offering in (
        ("2026-12-01T09:00:00.000Z", fee),
        ("2026-12-01T09:00:01.000Z", {"upfront_fee_usd": "1500"}),
    ):
        harness.ledger.put_once(
            request.id, f"{EXTENSION_CALL}#tpeo-stale#{at}", {"actor": "t", "offering": offering}
        )
    assert extension_spend(harness.ports, request.id) == Decimal("9500")
