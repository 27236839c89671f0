"""Keep serving (``serve_until``) capacity run on demand (on-demand first x serve_until x the chain's budget).

Found by attacking the meeting of on-demand first and keep serving:

- an on-demand ``PURCHASE`` records no upfront fee, and the roll-over gave the successor
  ``max_upfront_fee_usd`` less the chain's upfront fees only: the chain could spend the request's budget on
  demand and then the whole budget again on the next reservation;
- capacity run on demand puts no ``ReservationPurchased``, the event that arms the roll-over, so a request's
  own ``serve_until`` was accepted (202) and never acted on: the models stopped at ``latest_end`` and nobody
  was told.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from tests.integration.support import api_event, ledger_items, make_cloud, post_reservation, states
from tests.integration.test_ec2_capacity_blocks import create_launch_templates
from tests.integration.test_on_demand_first import REQUEST_ID, now_request

pytestmark = pytest.mark.integration

BUDGET = Decimal("12000")
SERVE_UNTIL = "2026-12-05T12:00:00Z"  # two days after latest_end 2026-12-03 12:00


def _item(cloud: LocalCloud, request_id: str, sk: str) -> dict[str, Any] | None:
    return next((i for i in ledger_items(cloud, request_id) if i["sk"] == sk), None)


def _on_demand_commitment(cloud: LocalCloud) -> Decimal:
    """What the on-demand instances may cost until latest_end (they run until then, unless handed over)."""
    purchase = _item(cloud, REQUEST_ID, "PURCHASE")
    assert purchase is not None
    assert purchase["market"] == "on-demand"
    rate = Decimal(str(purchase["on_demand_usd_per_hour"]))
    return rate * int(str(purchase["instance_count"])) * 96  # 2026-11-29 12:00 to 2026-12-03 12:00


def _chain_spend(cloud: LocalCloud) -> Decimal:
    released = next(i for i in ledger_items(cloud, REQUEST_ID) if i.get("state") == "RELEASED")
    spent = Decimal(str(released["detail"]["summary"]["on_demand_equivalent_served_usd"]))
    later = _item(cloud, f"{REQUEST_ID}-r2", "PURCHASE")
    return spent + (Decimal(str(later["upfront_fee_usd"])) if later is not None else 0)


def test_a_successor_of_capacity_run_on_demand_gets_only_the_budget_the_on_demand_spend_left() -> None:
    with make_cloud() as cloud:
        create_launch_templates(cloud)
        assert post_reservation(cloud, now_request(max_upfront_fee_usd=f"{BUDGET}"))["statusCode"] == 202
        cloud.run(stop_when=lambda: "READY" in states(cloud, REQUEST_ID))
        patched = cloud.api_request(
            api_event({"serve_until": SERVE_UNTIL}, method="PATCH", path=f"/reservations/{REQUEST_ID}")
        )
        assert patched["statusCode"] == 200, patched
        cloud.run_until_idle()
        committed = _on_demand_commitment(cloud)
        successor = _item(cloud, REQUEST_ID, "SUCCESSOR")
        if successor is not None:
            granted = Decimal(str(successor["request"]["max_upfront_fee_usd"]))
            assert granted + committed <= BUDGET, (granted, committed)
        assert _chain_spend(cloud) <= BUDGET


def test_serve_until_of_a_request_run_on_demand_is_acted_on_at_the_lead_time() -> None:
    body = now_request(max_upfront_fee_usd="40000", serve_until=SERVE_UNTIL)
    with make_cloud() as cloud:
        create_launch_templates(cloud)
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run_until_idle()
        assert _item(cloud, REQUEST_ID, "PURCHASE") is not None
        looked = [i for i in ledger_items(cloud, REQUEST_ID) if str(i["sk"]).startswith("ROLLOVER_")]
        successor = _item(cloud, REQUEST_ID, "SUCCESSOR")
        # Kept serving by a successor, or a person told why not: never silently dropped.
        assert looked or successor is not None, json.dumps(states(cloud, REQUEST_ID))
        assert _chain_spend(cloud) <= Decimal("40000")
