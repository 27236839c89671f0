"""Every dollar counts against the team (issue 28, point 6): capacity run on demand is held in the team's
month, the account cap and the team's instance quota before it is launched, as a purchase's fee is, and
settled from what ran when it is released.

The measured defect: a team allowed $2,000 a month ran 4 x ml.p5.48xlarge on demand (about $5,060, $3,060
over: 23 hours at $55.04 per instance-hour) while its view said $0 spent. One request for the four at once is
its own budget's refusal (a request may ask at most its team's month, and on demand for the window costs
more); the month was overrun by on-demand spend it never counted: here four requests of one instance each, in
the same month.

Every team here is ``ml-small`` (p5 in us-east-1), set by an administrator; its member asks on demand for a
window from now (2026-11-29 12:00 UTC) to 2026-11-30 12:00 UTC: 1 x ml.p5.48xlarge on demand for it is
24 h x $55.04 = $1,320.96 held.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from functools import partial
from typing import Any

import pytest
from capacity.adapters.policy_store import PolicyStore
from capacity.pricing import format_usd
from capacity.record_kinds import ON_DEMAND_REFUSED

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from tests.integration.support import (
    START,
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    states,
)
from tests.integration.test_ec2_capacity_blocks import EC2_REGIONS, blocks, create_launch_templates
from tests.integration.test_on_demand_first import now_request as ec2_now_request
from tests.integration.test_teams import ADMIN

pytestmark = pytest.mark.integration

MEMBER = "arn:aws:sts::123456789012:assumed-role/MlSmall/sam"
HOLD_ONE = Decimal("1320.96")
"""1 x ml.p5.48xlarge on demand for the 24 h window at $55.04 per instance-hour (us-east-1)."""
ENDS = ("RELEASED", "FAILED", "REJECTED", "CANCELLED")


def put_team(cloud: LocalCloud, *, budget: str, quota: int, ec2: bool = False) -> None:
    """``PUT /admin/teams/ml-small``: the month ``budget`` (USD, also its approval threshold: a threshold may
    not be above the budget) and ``quota`` ml.p5 instances at once (``ec2``: p5.48xlarge in the EC2 sample's
    regions instead)."""
    body = {
        "members": {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/MlSmall/*"]},
        "approvers": {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/Approvers/*"]},
        "monthly_budget_usd": budget,
        "approval_above_usd": budget,
        "instance_types": ["p5.48xlarge" if ec2 else "ml.p5.48xlarge"],
        "regions": list(EC2_REGIONS) if ec2 else ["us-east-1"],
        "instance_quota": {"p5" if ec2 else "ml.p5": quota},
    }
    answer = cloud.api_request(api_event(body, method="PUT", path="/admin/teams/ml-small", caller=ADMIN))
    assert answer["statusCode"] == 200, answer


def on_demand_request(request_id: str, *, count: int = 1, budget: str = "2000") -> dict[str, Any]:
    """``count`` x ml.p5.48xlarge for 24 h from now, on demand first (the window starts now), at most
    ``budget`` USD, released an hour before the window ends."""
    body = {key: value for key, value in base_request().items() if key != "approval_above_usd"}
    return {
        **body,
        "request_id": request_id,
        "instance_count": count,
        "earliest_start": "2026-11-29T12:00:00Z",
        "latest_end": "2026-11-30T12:00:00Z",
        "duration_hours": 24,
        "regions": ["us-east-1"],
        "max_upfront_fee_usd": budget,
        "release_margin_minutes": 60,
    }


def post(cloud: LocalCloud, body: dict[str, Any]) -> None:
    answer = cloud.api_request(api_event(body, caller=MEMBER))
    assert answer["statusCode"] == 202, answer


def ended(cloud: LocalCloud, request_id: str) -> bool:
    return bool(set(ENDS) & set(states(cloud, request_id)))


def team_view(cloud: LocalCloud) -> dict[str, Any]:
    """``GET /admin/teams/ml-small``: this month's spend (held and settled), what is left, instances held."""
    answer = cloud.api_request(api_event(None, method="GET", path="/admin/teams/ml-small", caller=ADMIN))
    assert answer["statusCode"] == 200, answer
    view: dict[str, Any] = json.loads(answer["body"])
    return view


def costs(cloud: LocalCloud) -> dict[str, Any]:
    """``GET /costs?team=ml-small`` as the administrator: what ran, per reservation."""
    answer = cloud.api_request(
        api_event(None, method="GET", path="/costs", query={"team": "ml-small"}, caller=ADMIN)
    )
    assert answer["statusCode"] == 200, answer
    report: dict[str, Any] = json.loads(answer["body"])
    return report


def item(cloud: LocalCloud, request_id: str, sk: str) -> dict[str, Any] | None:
    return next((i for i in ledger_items(cloud, request_id) if i["sk"] == sk), None)


def on_demand_endpoints(cloud: LocalCloud) -> list[str]:
    """The endpoints created without a training plan (on demand), by name, from the call log."""
    configs = {
        c.params["EndpointConfigName"]
        for c in cloud.dispatcher.calls
        if c.operation == "CreateEndpointConfig"
        and "CapacityReservationConfig" not in c.params["ProductionVariants"][0]
    }
    return sorted(
        c.params["EndpointName"]
        for c in cloud.dispatcher.calls
        if c.operation == "CreateEndpoint" and c.params["EndpointConfigName"] in configs
    )


def summary(cloud: LocalCloud, request_id: str) -> dict[str, Any]:
    released = next(i for i in ledger_items(cloud, request_id) if i.get("state") == "RELEASED")
    found: dict[str, Any] = released["detail"]["summary"]
    return found


def test_the_measured_case_on_demand_is_held_in_the_teams_month_and_never_runs_over_it() -> None:
    with make_cloud() as cloud:
        put_team(cloud, budget="2000", quota=8)
        # 4 x ml.p5.48xlarge on demand in one request: $5,283.84 for the window, above its own budget.
        post(cloud, on_demand_request("small-all", count=4))
        cloud.run(stop_when=lambda: ended(cloud, "small-all"))
        assert on_demand_endpoints(cloud) == []
        assert team_view(cloud)["spent_usd"] == "0"

        # The same four instances, one request each: the first is held, then launched.
        post(cloud, on_demand_request("small-1"))
        cloud.run(stop_when=lambda: "READY" in states(cloud, "small-1"))
        view = team_view(cloud)
        assert (Decimal(view["spent_usd"]), Decimal(view["left_usd"])) == (HOLD_ONE, Decimal("679.04"))
        assert view["instances_held"] == {"ml.p5": 1}
        (line,) = costs(cloud)["reservations"]
        assert (line["request_id"], line["market"]) == ("small-1", "on-demand")

        for request_id in ("small-2", "small-3", "small-4"):
            post(cloud, on_demand_request(request_id))
            cloud.run(stop_when=partial(ended, cloud, request_id))
            refused = item(cloud, request_id, ON_DEMAND_REFUSED)
            assert refused is not None, states(cloud, request_id)
            # Held from the moment it is tried: a little later than small-1, a little less than HOLD_ONE.
            amount = Decimal(refused["amount_usd"])
            assert Decimal(1300) < amount < HOLD_ONE
            assert refused["reason"] == (
                "team ml-small has $679.04 left in November 2026 of its monthly budget $2,000.00; on demand "
                f"for 1 x ml.p5.48xlarge until 2026-11-30 12:00 UTC costs {format_usd(amount)}: nothing was "
                "launched on demand"
            )
            ending = next(i for i in ledger_items(cloud, request_id) if i.get("state") in ENDS)
            assert f"On demand was not launched: {refused['reason']}." in ending["detail"]["reason"]
        assert on_demand_endpoints(cloud) == ["co-small-1"]
        assert Decimal(team_view(cloud)["spent_usd"]) == HOLD_ONE

        cloud.run_until_idle()  # small-1 released at 2026-11-30 11:00 UTC, an hour before its window ends
        ended_with = summary(cloud, "small-1")
        ran, used = (
            Decimal(ended_with["on_demand_equivalent_served_usd"]),
            Decimal(ended_with["instance_hours_used"]),
        )
        assert Decimal(22) < used < Decimal(23)  # READY a few minutes after 12:00 until 11:00 the next day
        assert abs(ran - Decimal("55.04") * used) < Decimal("0.30")  # hours rounded to 0.01 in the summary
        view = team_view(cloud)
        assert view["month"] == "2026-11"
        assert Decimal(view["spent_usd"]) == ran <= Decimal(2000)
        assert view["instances_held"] == {"ml.p5": 0}
        assert Decimal(costs(cloud)["totals"]["paid_usd"]) == ran


def test_the_quota_counts_instances_run_on_demand() -> None:
    with make_cloud() as cloud:
        put_team(cloud, budget="50000", quota=2)
        post(cloud, on_demand_request("small-two", count=2, budget="3000"))
        cloud.run(stop_when=lambda: "READY" in states(cloud, "small-two"))
        assert team_view(cloud)["instances_held"] == {"ml.p5": 2}

        post(cloud, on_demand_request("small-third"))
        cloud.run(stop_when=lambda: ended(cloud, "small-third"))
        refused = item(cloud, "small-third", ON_DEMAND_REFUSED)
        assert refused is not None
        assert refused["reason"] == (
            "team ml-small holds 2 of its 2 ml.p5 instances; on demand for 1 x ml.p5.48xlarge until "
            "2026-11-30 12:00 UTC needs more than the 0 left: nothing was launched on demand"
        )
        assert on_demand_endpoints(cloud) == ["co-small-two"]
        assert Decimal(team_view(cloud)["spent_usd"]) == 2 * HOLD_ONE  # the refused one held nothing


def test_the_hold_is_settled_to_what_ran_when_the_capacity_is_released() -> None:
    with make_cloud() as cloud:
        put_team(cloud, budget="2000", quota=8)
        post(cloud, on_demand_request("small-1"))
        cloud.run(stop_when=lambda: "READY" in states(cloud, "small-1"))
        assert Decimal(team_view(cloud)["spent_usd"]) == HOLD_ONE
        cloud.run(until=START + timedelta(hours=5))
        cancel = cloud.api_request(
            api_event({}, method="DELETE", path="/reservations/small-1", caller=MEMBER)
        )
        assert cancel["statusCode"] == 202, cancel
        cloud.run_until_idle()
        assert states(cloud, "small-1")[-1] == "RELEASED"
        ran = summary(cloud, "small-1")
        used = Decimal(ran["instance_hours_used"])
        assert Decimal(4) < used < Decimal(5)  # READY a few minutes after 12:00, cancelled at 17:00
        actual = Decimal(ran["on_demand_equivalent_served_usd"])
        assert abs(actual - Decimal("55.04") * used) < Decimal("0.30")  # hours rounded to 0.01 in the summary
        view = team_view(cloud)
        assert Decimal(view["spent_usd"]) == actual < HOLD_ONE
        assert Decimal(view["left_usd"]) == Decimal(2000) - actual
        assert view["instances_held"] == {"ml.p5": 0}
        (line,) = costs(cloud)["reservations"]
        assert Decimal(line["paid_usd"]) == actual


def test_two_requests_of_one_team_at_once_cannot_both_pass_its_month_on_demand() -> None:
    with make_cloud() as cloud:
        put_team(cloud, budget="2000", quota=8)
        post(cloud, on_demand_request("small-a"))
        post(cloud, on_demand_request("small-b"))
        cloud.run(
            stop_when=lambda: all(
                ended(cloud, r) or "READY" in states(cloud, r) for r in ("small-a", "small-b")
            )
        )
        launched = on_demand_endpoints(cloud)
        assert len(launched) == 1, launched
        refused = [r for r in ("small-a", "small-b") if item(cloud, r, ON_DEMAND_REFUSED) is not None]
        assert len(refused) == 1, refused
        assert launched != [f"co-{refused[0]}"]
        assert Decimal(team_view(cloud)["spent_usd"]) == HOLD_ONE


def test_no_capacity_on_demand_gives_the_hold_back_and_the_block_bought_instead_is_held_alone() -> None:
    """EC2, 2 x p5.48xlarge on demand first in three regions, none with capacity: the on-demand hold (96 h at
    the dearest rate, $11,412.09) is given back before the capacity block's fee is held."""
    with make_cloud(market=MarketConfig(on_demand_capacity={"*/p5.48xlarge": 0})) as cloud:
        put_team(cloud, budget="20000", quota=2, ec2=True)
        create_launch_templates(cloud)
        post(cloud, ec2_now_request())
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "train-now-ec2"))
        (block,) = blocks(cloud)
        fee = Decimal(
            next(i for i in ledger_items(cloud, "train-now-ec2") if i["sk"] == "PURCHASE")["upfront_fee_usd"]
        )
        view = team_view(cloud)
        assert (Decimal(view["spent_usd"]), view["instances_held"]) == (fee, {"p5": 2})
        assert block["TotalInstanceCount"] == 2
        cloud.run_until_idle()  # released in December: November keeps the fee, the instances are back
        store = PolicyStore(cloud.stack.physical_id("PolicyTable"), cloud.client("dynamodb"))
        assert (store.spent("2026-11", "ml-small"), store.reserved_instances("ml-small", "p5")) == (fee, 0)
        hold = store.hold("train-now-ec2#ON_DEMAND")
        assert hold is not None
        assert (hold.money_returned, hold.quota_returned) == (True, True)
