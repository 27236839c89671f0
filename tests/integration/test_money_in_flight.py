"""Money in flight (issue 28 item 2, issue 29 kindness 1): extension payments that stay ``payment-pending``
for hours, as AWS leaves them, while the release approaches. On the local cloud with
``Timings.extension_payment_pending`` set, on the virtual clock.

The rules: an extension is asked only when AWS's payment deadline falls before the release begins; a
release never deletes what an extension in flight pays for (it waits for the payment, and serves to the
new end when it lands); a payment AWS fails at its deadline is recorded and told; the ledger never reads
``EXTENDED`` after ``RELEASING``."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.record_kinds import EXTENSION_OUTCOME, STATE_PREFIX

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig, Timings
from tests.integration.support import api_event, ledger_items, make_cloud, slack_texts, states, training_plans
from tests.integration.test_extensions import RID, buy_one_day, extended, extensions, ready, succeeded

pytestmark = pytest.mark.integration
MARGIN = timedelta(minutes=60)
"""The demo request's release margin (the default ``release_margin_minutes``)."""


def market(pending: timedelta) -> MarketConfig:
    """Every pool holds 8 instances; every extension payment stays pending for ``pending``."""
    return MarketConfig(capacity={"*": 8}, timings=Timings(extension_payment_pending=(pending, pending)))


def end_of(purchase: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(purchase["end_time"]).replace("Z", "+00:00"))


def state_order(cloud: LocalCloud) -> list[str]:
    """The reservation's states in the ledger's order."""
    entries = [i for i in ledger_items(cloud, RID) if str(i["sk"]).startswith(STATE_PREFIX)]
    entries.sort(key=lambda i: str(i["sk"]))
    return [str(i["state"]) for i in entries]


def never_extended_after_releasing(order: list[str]) -> bool:
    return "RELEASING" not in order or "EXTENDED" not in order[order.index("RELEASING") :]


def test_an_extension_paid_hours_later_just_before_the_release_serves_to_the_new_end() -> None:
    """Asked 12 h 5 min before the release, paid 11 h 58 min later (7 minutes before the release): the
    fee buys a day that serves (before: the workflow stopped polling after about 8 hours, the release
    deleted the endpoint, and AWS took the fee for a day nothing served)."""
    with make_cloud(market=market(timedelta(hours=11, minutes=58))) as cloud:
        purchase = ready(cloud)
        old_end = end_of(purchase)
        release = old_end - MARGIN
        cloud.run(until=release - timedelta(hours=12, minutes=5))
        offer = buy_one_day(cloud)
        cloud.run(until=old_end + timedelta(hours=2))
        order = state_order(cloud)
        assert "RELEASING" not in order, order  # still serving after the old end
        (entry,) = extended(cloud)
        assert Decimal(entry["money_usd"]) == Decimal(offer["upfront_fee_usd"])
        assert entry["detail"]["end_time"] == (old_end + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        (plan,) = training_plans(cloud)
        assert plan["EndTime"] == old_end + timedelta(days=1)
        cloud.run_until_idle()
        order = state_order(cloud)
        assert order[-1] == "RELEASED"
        assert never_extended_after_releasing(order), order
        released = next(
            i
            for i in ledger_items(cloud, RID)
            if str(i["sk"]).startswith(STATE_PREFIX) and i["state"] == "RELEASED"
        )
        assert released["at"] > (old_end + timedelta(hours=20)).strftime("%Y-%m-%dT%H:%M:%S")
        assert cloud.billable_resources() == []


def test_an_extension_asked_when_its_payment_could_land_after_the_release_is_refused() -> None:
    """11 hours before the release AWS could take the payment until 35 minutes before the end, after the
    release began: refused with the rule, nothing bought (before: bought, and paid for nothing)."""
    with make_cloud(market=market(timedelta(hours=10, minutes=30))) as cloud:
        purchase = ready(cloud)
        release = end_of(purchase) - MARGIN
        cloud.run(until=release - timedelta(hours=11))
        dry = extensions(cloud, {"duration_hours": 24})
        assert dry["statusCode"] == 200, dry
        (offer,) = dry["json"]["offerings"]
        assert offer["allowed"] is False
        assert "12 hours before the release" in offer["problem"]
        refused = extensions(cloud, {"duration_hours": 24, "offering_id": offer["offering_id"]})
        assert refused["statusCode"] == 409, refused
        assert "12 hours before the release" in refused["json"]["message"]
        cloud.run_until_idle()
        assert succeeded(cloud, "ExtendTrainingPlan") == []
        assert extended(cloud) == []
        assert state_order(cloud)[-1] == "RELEASED"


def test_a_pending_extension_that_fails_at_the_aws_deadline_is_recorded_told_and_the_release_goes_on() -> (
    None
):
    """Pending longer than AWS allows: AWS fails it 12 hours after the purchase (10 minutes before the
    release); the outcome is recorded, the requester told, the team's month given the fee back, and the
    release runs at the old end (before: the workflow stopped polling after about 8 hours and recorded no
    outcome, the money in flight for good)."""
    with make_cloud(market=market(timedelta(hours=13))) as cloud:
        purchase = ready(cloud)
        old_end = end_of(purchase)
        release = old_end - MARGIN
        cloud.run(until=release - timedelta(hours=12, minutes=10))
        buy_one_day(cloud)
        cloud.run_until_idle()
        (outcome,) = [i for i in ledger_items(cloud, RID) if str(i["sk"]).startswith(f"{EXTENSION_OUTCOME}#")]
        assert outcome["outcome"] == "failed"
        assert outcome["end_time"] == purchase["end_time"]
        assert extended(cloud) == []
        order = state_order(cloud)
        assert order[-1] == "RELEASED"
        assert "EXTENDED" not in order
        released = next(
            i
            for i in ledger_items(cloud, RID)
            if str(i["sk"]).startswith(STATE_PREFIX) and i["state"] == "RELEASED"
        )
        assert released["at"] < old_end.strftime("%Y-%m-%dT%H:%M:%S")
        assert f"Extension of {RID} FAILED" in slack_texts(cloud)
        (plan,) = training_plans(cloud)
        assert plan["EndTime"] == old_end


def test_a_cancel_names_the_extension_in_flight_and_its_release_waits_for_the_payment() -> None:
    """A DELETE while an extension's payment is pending: the confirmation names that fee too; confirmed,
    the release waits for the payment (recorded ``EXTENDED`` before ``RELEASING``), then releases."""
    with make_cloud(market=market(timedelta(hours=3))) as cloud:
        purchase = ready(cloud)
        cloud.run(until=end_of(purchase) - timedelta(hours=30))
        offer = buy_one_day(cloud)
        cloud.run(stop_when=lambda: bool(succeeded(cloud, "ExtendTrainingPlan")))
        path = f"/reservations/{RID}"
        ask = cloud.api_request(api_event(None, method="DELETE", path=path, query={}))
        assert ask["statusCode"] == 409, ask
        assert offer["offering_id"] in ask["body"] or "in flight" in ask["body"]
        assert "in flight" in ask["body"]
        confirmed = cloud.api_request(api_event(None, method="DELETE", path=path))
        assert confirmed["statusCode"] in (200, 202), confirmed
        cloud.run_until_idle()
        order = state_order(cloud)
        assert order[-1] == "RELEASED"
        assert never_extended_after_releasing(order), order
        assert "EXTENDED" in order  # the fee AWS took is recorded, before the release began
        assert "CANCELLED" in states(cloud, RID)
        assert cloud.billable_resources() == []
