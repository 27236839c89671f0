"""Bring your own reservation (issue 17 item 5) against races and what the money reports say, on the local
cloud:

- two requests bringing one plan at once both pass the door (nobody has adopted it yet): the claims made
  before use let at most one of them serve on it;
- a plan of another account is refused at the door, naming the field;
- a brought plan saves its request nothing: the cost summary (ledger and Slack), the reservation's spend and
  the team's cost report say what the use was worth on demand, and no fee, no saving.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.integration.support import api_event, ledger_items, make_cloud, post_reservation, states
from tests.integration.test_brought_reservation import _brought_request, _buy_elsewhere, _creates

pytestmark = pytest.mark.integration

RID = "brought-plan"


def test_two_requests_bringing_one_plan_at_once_never_both_serve_on_it() -> None:
    with make_cloud() as cloud:
        arn = _buy_elsewhere(cloud)
        first = _brought_request(cloud, arn)
        twin = {**first, "request_id": "brought-twin"}
        # Both pass the door: neither has adopted the plan yet.
        assert post_reservation(cloud, first)["statusCode"] == 202
        assert post_reservation(cloud, twin)["statusCode"] == 202
        cloud.run_until_idle()

        served = [rid for rid in (RID, "brought-twin") if "READY" in states(cloud, rid)]
        assert len(served) <= 1, served
        refused = [
            item["detail"]
            for rid in (RID, "brought-twin")
            for item in ledger_items(cloud, rid)
            if item.get("state") == "FAILED"
        ]
        assert refused, "neither was refused"
        assert all(d["error"] == "BroughtReservationRefused" for d in refused), refused
        assert all("already in use by request" in d["reason"] for d in refused), refused
        assert _creates(cloud) == 1  # central procurement's: nothing bought by either
        assert cloud.billable_resources() == []


def test_a_plan_of_another_account_is_refused_at_the_door() -> None:
    with make_cloud() as cloud:
        arn = _buy_elsewhere(cloud)
        body = {
            **_brought_request(cloud, arn),
            "training_plan_arn": arn.replace("123456789012", "210987654321"),
        }
        answer = post_reservation(cloud, body)
        assert answer["statusCode"] == 422, answer["json"]
        errors = {e["field"]: e["message"] for e in answer["json"]["errors"]}
        assert "exists in this account" in errors["training_plan_arn"], errors
        cloud.run_until_idle()
        assert states(cloud, RID) == []


def test_a_brought_plan_saves_its_request_and_team_nothing_in_every_cost_report() -> None:
    with make_cloud() as cloud:
        arn = _buy_elsewhere(cloud)
        assert post_reservation(cloud, _brought_request(cloud, arn))["statusCode"] == 202
        cloud.run_until_idle()
        assert states(cloud, RID)[-1] == "RELEASED"

        # The cost summary: what ran was worth money on demand, but nothing was paid here or saved here
        got = json.loads(
            cloud.api_request(api_event(None, method="GET", path=f"/reservations/{RID}"))["body"]
        )
        summary = next(h for h in got["history"] if h["state"] == "RELEASED")["detail"]["summary"]
        assert summary["brought"] is True
        assert Decimal(summary["upfront_fee_usd"]) == 0
        assert Decimal(summary["on_demand_equivalent_served_usd"]) > 0
        unsaid = ("saving_usd", "saving_percent", "break_even_utilisation_percent")
        assert [summary[key] for key in unsaid] == [None] * 3, summary
        assert summary["effective_usd_per_served_instance_hour"] is None, summary
        released = next(m for m in cloud.outbox.messages if f"{RID} RELEASED" in m.text)
        assert "not paid by this request" in released.text
        assert "Saving vs on-demand        $" not in released.text, released.text

        # The reservation's spend and the team's month: no fee, no saving
        spend = got["spend"]
        assert (spend["paid_usd"], spend["saving_usd"], spend["brought"]) == ("0.00", None, True)
        report = json.loads(cloud.api_request(api_event(None, method="GET", path="/costs"))["body"])
        (row,) = report["rows"]
        assert row["group"] == "ml-platform"
        assert (row["paid_usd"], row["saving_usd"]) == ("0.00", "0.00"), row
        assert Decimal(row["on_demand_equivalent_used_usd"]) > 0
