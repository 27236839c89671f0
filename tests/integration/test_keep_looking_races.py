"""Keep looking (issue 17 item 4) against delivery, timing, crashes and other buyers, on the local cloud:

- the offering a look chose is bought by someone else before the purchase call lands (another buyer was
  waiting for the same capacity): nothing is bought, and the release that follows reconciles the purchase
  intent with AWS without being refused (``ListTrainingPlans``);
- a fresh search's replacement that costs more than the chosen offering is never bought without the approval
  the team's threshold asks for;
- the team's month is judged at the look that buys, not at the first look (a search that crosses into a new
  month buys on the new month's budget and holds it there), and two requests that find capacity at the same
  look never spend more than the team's month together.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.record_kinds import PURCHASE_MISSED

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import (
    APPROVER,
    START,
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    post_reservation,
    states,
    training_plans,
)
from tests.integration.test_extension_approval import lower_team_threshold

pytestmark = pytest.mark.integration

RID = "eval-week-49"
REGION = "us-east-1"
APPEARS = START + timedelta(days=3)
EVERY = 60
"""The requests here look hourly: what they claim is what a look does, not how often one comes (that is
test_keep_looking.py's, at the default 15 minutes); four times fewer looks, the suite's slowest tests."""


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _slow_purchase_call() -> FaultInjector:
    """The request's ``CreateTrainingPlan`` takes 20 s to land (past the client's read timeout: botocore
    retries it), so another buyer can get in between the choice and the purchase."""
    slow = FaultKind.LATENCY
    return FaultInjector(
        [
            FaultRule(
                service="sagemaker", operation="CreateTrainingPlan", kind=slow, latency_seconds=20, times=1
            )
        ]
    )


def _parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment.replace("Z", "+00:00"))


def _intent(cloud: LocalCloud) -> dict[str, Any] | None:
    return next((i for i in ledger_items(cloud, RID) if i["sk"] == "PURCHASE_INTENT"), None)


def _search(cloud: LocalCloud, start: str, end: str) -> list[dict[str, Any]]:
    with cloud.dispatcher.exempt():
        found: list[dict[str, Any]] = cloud.client("sagemaker", REGION).search_training_plan_offerings(
            InstanceType="ml.p5.48xlarge",
            InstanceCount=2,
            StartTimeAfter=datetime.fromisoformat(start.replace("Z", "+00:00")),
            EndTimeBefore=datetime.fromisoformat(end.replace("Z", "+00:00")),
            DurationHours=72,
            TargetResources=["endpoint"],
        )["TrainingPlanOfferings"]
    return found


def _someone_else_buys_the_chosen_window(cloud: LocalCloud) -> dict[str, Any]:
    """Once the request's purchase intent is written (its call on its way), another buyer of the account (e.g.
    a team that was waiting for the same capacity) buys every offering of the chosen window, in every zone.
    Returns the chosen offering (the intent's)."""
    cloud.run(stop_when=lambda: _intent(cloud) is not None)
    chosen: dict[str, Any] = dict((_intent(cloud) or {})["offering"])
    bought = 0
    while found := _search(cloud, chosen["start_time"], chosen["end_time"]):
        with cloud.dispatcher.exempt():
            cloud.client("sagemaker", REGION).create_training_plan(
                TrainingPlanName=f"someone-else-{bought}",
                TrainingPlanOfferingId=found[0]["TrainingPlanOfferingId"],
            )
        bought += 1
    assert bought >= 1
    return chosen


SCARCE = MarketConfig(listed_from={"*/ml.p5.48xlarge": APPEARS}, capacity={f"{REGION}/ml.p5.48xlarge": 2})
"""Capacity that appears on day 3, in pools of 2 instances (another buyer can take a whole window)."""


def _keep_looking(cloud: LocalCloud, deadline: datetime = START + timedelta(days=5, hours=12)) -> None:
    """POST the demo request in one region, looking until ``deadline`` (day 5 12:00) for :data:`SCARCE`
    capacity."""
    body = {
        **base_request(),
        "regions": [REGION],
        "search_until": _iso(deadline),
        "search_every_minutes": EVERY,
    }
    assert post_reservation(cloud, body)["statusCode"] == 202


def _ours(cloud: LocalCloud) -> list[dict[str, Any]]:
    return [p for p in training_plans(cloud) if not p["TrainingPlanName"].startswith("someone-else")]


def test_an_offering_bought_elsewhere_at_the_look_that_buys_is_not_bought_and_the_release_reconciles() -> (
    None
):
    # Given capacity that appears on day 3 in small pools, and a request that keeps looking for it until a
    # minute after it appears (the look that finds it is the deadline's: no later look can replace it)
    with make_cloud(market=SCARCE, faults=_slow_purchase_call()) as cloud:
        _keep_looking(cloud, deadline=APPEARS + timedelta(minutes=1))
        # When the look that finds it chooses an offering another buyer then takes before the purchase lands
        _someone_else_buys_the_chosen_window(cloud)
        cloud.run_until_idle()

        # Then nothing is bought for the request, it ends failed and told, and the release that follows asks
        # AWS what the intent bought (ListTrainingPlans when DescribeTrainingPlan finds no plan) and completes
        assert _ours(cloud) == []
        failed = [i for i in ledger_items(cloud, RID) if i.get("state") == "FAILED"]
        assert [f["detail"]["error"] for f in failed] == ["OfferingExpired"], failed
        assert "nothing was bought" in failed[0]["detail"]["reason"]
        assert _team_spent(cloud, failed[0]["at"][:7]) == 0  # the fee held for the purchase came back
        assert cloud.iam is not None
        assert cloud.iam.denials == []
        assert states(cloud, RID)[-1] == "FAILED"  # no release failure recorded after it
        assert cloud.billable_resources() == []


def test_an_offering_bought_elsewhere_before_the_deadline_looks_again_and_buys_at_a_later_look() -> None:
    # Given capacity that appears in us-east-1 on day 3 (a pool of 2 instances) and in us-west-2 on day 5, and
    # a request for either region that keeps looking until day 8
    market = MarketConfig(
        listed_from={
            f"{REGION}/ml.p5.48xlarge": APPEARS,
            "us-west-2/ml.p5.48xlarge": START + timedelta(days=5),
        },
        capacity={f"{REGION}/ml.p5.48xlarge": 2},
    )
    with make_cloud(market=market, faults=_slow_purchase_call()) as cloud:
        deadline = START + timedelta(days=8)
        body = {
            **base_request(),
            "regions": [REGION, "us-west-2"],
            "search_until": _iso(deadline),
            "search_every_minutes": EVERY,
        }
        assert post_reservation(cloud, body)["statusCode"] == 202
        # When the look that finds it (day 3) chooses a window another buyer then takes before the purchase
        taken = _someone_else_buys_the_chosen_window(cloud)
        cloud.run(stop_when=lambda: any(i["sk"] == "PURCHASE_MISSED#1" for i in ledger_items(cloud, RID)))
        month = cloud.now().strftime("%Y-%m")
        held_between_looks = _team_spent(cloud, month)
        cloud.run_until_idle()

        # Then it is not ended: the intent is reconciled (nothing bought, the hold given back), SEARCHING says
        # the offering was taken, and the first look after us-west-2's capacity appears (day 5) buys there
        items = ledger_items(cloud, RID)
        assert held_between_looks == 0
        seen = states(cloud, RID)
        assert "FAILED" not in seen, seen
        assert seen[-1] == "RELEASED", seen
        taken_looks = [
            i["detail"]
            for i in items
            if i.get("state") == "SEARCHING" and i["detail"]["decision"] == "OFFERING_TAKEN"
        ]
        assert len(taken_looks) == 1, taken_looks
        assert "taken before it could be bought" in taken_looks[0]["reason"]
        taken_at = next(
            _parse(i["at"]) for i in items if i.get("state") == "SEARCHING" and i["detail"] == taken_looks[0]
        )
        next_look = _parse(taken_looks[0]["next_look_at"])
        assert (
            taken_at < next_look <= taken_at + timedelta(minutes=EVERY)
        )  # the next look, one interval at most
        (missed,) = [i for i in items if i["sk"].startswith(f"{PURCHASE_MISSED}#")]
        assert missed["offering"]["offering_id"] == taken["offering_id"]
        assert {i["sk"] for i in items if i["sk"].startswith("PURCHASE_INTENT")} == {
            "PURCHASE_INTENT",
            "PURCHASE_INTENT#1",
        }
        (purchased,) = [i for i in items if i.get("state") == "PURCHASED"]
        west_appears = START + timedelta(days=5)
        assert west_appears <= _parse(purchased["at"]) < west_appears + timedelta(minutes=EVERY + 5)
        assert purchased["detail"]["region"] == "us-west-2"
        second = next(i for i in items if i["sk"] == "PURCHASE_INTENT#1")
        assert second["region"] == "us-west-2"
        bought = [(p["TrainingPlanName"], p["TrainingPlanArn"].split(":")[3]) for p in _ours(cloud)]
        assert bought == [(f"co-{RID}", "us-west-2")]  # one plan, nothing of ours in us-east-1
        assert _team_spent(cloud, month) == Decimal(purchased["money_usd"])  # held once, for what it bought
        assert cloud.billable_resources() == []


def test_an_approved_offering_bought_elsewhere_ends_the_request_as_before() -> None:
    # Given a request that keeps looking until day 8 and needs an approval above $1,000 (one per request)
    with make_cloud(market=SCARCE, faults=_slow_purchase_call()) as cloud:
        body = {
            **base_request(),
            "regions": [REGION],
            "search_until": _iso(START + timedelta(days=8)),
            "search_every_minutes": EVERY,
        }
        body["approval_above_usd"] = "1000"
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, RID))
        approval = api_event({"approved": True}, path=f"/reservations/{RID}/approval", caller=APPROVER)
        assert cloud.api_request(approval)["statusCode"] == 200
        # When the approved offering is taken before its purchase lands
        _someone_else_buys_the_chosen_window(cloud)
        cloud.run_until_idle()

        # Then it ends FAILED (OfferingExpired) before the deadline: a later look could not be approved again
        items = ledger_items(cloud, RID)
        (failed,) = [i for i in items if i.get("state") == "FAILED"]
        assert failed["detail"]["error"] == "OfferingExpired"
        assert failed["at"] < _iso(START + timedelta(days=8))
        assert not [i for i in items if i["sk"].startswith(f"{PURCHASE_MISSED}#")]
        assert _ours(cloud) == []
        assert _team_spent(cloud, failed["at"][:7]) == 0
        assert cloud.billable_resources() == []


def test_a_replacement_above_the_teams_threshold_is_not_bought_without_an_approval() -> None:
    # Given a team that needs an approval above a cent more than the cheapest offering, and a request that
    # names no threshold of its own
    market = MarketConfig(default_training_plan_quota=4096)  # the other buyer is of this account too
    with make_cloud(market=market, faults=_slow_purchase_call()) as cloud:
        body = {**base_request(), "regions": [REGION], "latest_end": "2026-12-20T00:00:00Z"}
        del body["approval_above_usd"]
        cheapest = min(
            Decimal(o["UpfrontFee"]) for o in _search(cloud, body["earliest_start"], body["latest_end"])
        )
        threshold = cheapest + Decimal("0.01")
        lower_team_threshold(cloud, threshold)
        assert post_reservation(cloud, body)["statusCode"] == 202
        # When the cheapest offering, chosen without an approval, is bought elsewhere before the purchase
        chosen = _someone_else_buys_the_chosen_window(cloud)
        assert Decimal(chosen["upfront_fee_usd"]) == cheapest
        cloud.run_until_idle()

        # Then the fresh search's dearer replacement is not bought: it would need an approver
        assert [p["UpfrontFee"] for p in _ours(cloud) if Decimal(p["UpfrontFee"]) > threshold] == []
        seen = states(cloud, RID)
        assert "PURCHASED" not in seen, seen
        assert "PLANNED" in seen, seen
        assert seen[-1] == "FAILED", seen
        (failed,) = [i for i in ledger_items(cloud, RID) if i.get("state") == "FAILED"]
        assert failed["detail"]["error"] == "OfferingExpired"
        assert _team_spent(cloud, failed["at"][:7]) == 0
        assert cloud.billable_resources() == []


def _set_monthly_budget(cloud: LocalCloud, usd: Decimal) -> None:
    from capacity.adapters.policy_store import PolicyStore

    store = PolicyStore(cloud.stack.physical_id("PolicyTable"), cloud.client("dynamodb"))
    team = store.team("ml-platform")
    assert team is not None
    smaller = {**team.model_dump(), "monthly_budget_usd": usd, "approval_above_usd": usd}
    store.put_team(type(team).model_validate(smaller), actor="test", now=cloud.now())


def _team_spent(cloud: LocalCloud, month: str) -> Decimal:
    from capacity.adapters.policy_store import PolicyStore

    return PolicyStore(cloud.stack.physical_id("PolicyTable"), cloud.client("dynamodb")).spent(
        month, "ml-platform"
    )


def test_the_teams_month_is_judged_at_the_look_that_buys_not_at_the_first_look() -> None:
    # Given a team with $3,000 a month that spent about $2,000 of November on another reservation, and a
    # request (also about $2,000) that starts looking in November for capacity that appears in December
    market = MarketConfig(
        listed_from={f"{REGION}/ml.p5.48xlarge": datetime(2026, 12, 2, 12, tzinfo=START.tzinfo)}
    )
    with make_cloud(market=market) as cloud:
        budget = Decimal(3000)
        _set_monthly_budget(cloud, budget)
        other = {**base_request(), "request_id": "november-spend", "regions": ["us-west-2"]}
        other |= {"max_upfront_fee_usd": "3000", "approval_above_usd": "3000"}
        assert post_reservation(cloud, other)["statusCode"] == 202
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "november-spend"))
        november = _team_spent(cloud, "2026-11")
        body = {
            **base_request(),
            "regions": [REGION],
            "search_until": "2026-12-05T00:00:00Z",
            "search_every_minutes": EVERY,
        }
        body |= {"max_upfront_fee_usd": "3000", "approval_above_usd": "3000"}
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run_until_idle()

        # Then it bought at a December look, on December's budget, and the hold is December's
        (purchased,) = [i for i in ledger_items(cloud, RID) if i.get("state") == "PURCHASED"]
        fee = Decimal(purchased["money_usd"])
        assert budget - november < fee  # November had no room for it: judged at the first look, refused
        assert purchased["at"].startswith("2026-12-")
        assert "REJECTED" not in states(cloud, RID)
        assert _team_spent(cloud, "2026-12") == fee
        assert _team_spent(cloud, "2026-11") == november
        assert cloud.billable_resources() == []


def test_two_requests_that_find_capacity_at_the_same_look_never_exceed_the_teams_month() -> None:
    # Given a team with $3,000 a month and two of its requests (about $2,000 each) that keep looking on the
    # same schedule for capacity that appears on day 3
    market = MarketConfig(listed_from={"*/ml.p5.48xlarge": APPEARS})
    with make_cloud(market=market) as cloud:
        budget = Decimal(3000)
        _set_monthly_budget(cloud, budget)
        limits = {
            "max_upfront_fee_usd": "3000",
            "approval_above_usd": "3000",
            "search_until": "2026-12-05T00:00:00Z",
            "search_every_minutes": EVERY,
        }
        for request_id, region in (("looks-east", "us-east-1"), ("looks-west", "us-west-2")):
            body = {**base_request(), "request_id": request_id, "regions": [region], **limits}
            assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run_until_idle()

        # Then both choose at the same look, and the purchase's atomic hold lets one of them buy
        outcomes = {rid: states(cloud, rid)[-1] for rid in ("looks-east", "looks-west")}
        bought = [rid for rid in outcomes if "PURCHASED" in states(cloud, rid)]
        assert len(bought) == 1, outcomes
        (refused,) = [rid for rid in outcomes if rid not in bought]
        ended = next(i for i in ledger_items(cloud, refused) if i.get("state") in ("FAILED", "REJECTED"))
        assert ended["detail"]["error"] == "TeamLimitExceeded", ended
        assert [p["TrainingPlanName"] for p in training_plans(cloud)] == [f"co-{bought[0]}"]
        assert _team_spent(cloud, "2026-12") <= budget
        assert cloud.billable_resources() == []


def test_a_cancel_while_the_looks_purchase_misses_its_offering_gives_the_team_its_hold_back() -> None:
    # Given a request that keeps looking, whose look that finds capacity chose an offering
    with make_cloud(market=SCARCE, faults=_slow_purchase_call()) as cloud:
        _keep_looking(cloud)
        # When another buyer takes it while the purchase call is on its way (the fee held for the team), and
        # the requester cancels meanwhile
        _someone_else_buys_the_chosen_window(cloud)
        month = cloud.now().strftime("%Y-%m")
        assert _team_spent(cloud, month) > 0  # held for the call on its way
        asked = cloud.api_request(api_event(None, method="DELETE", path=f"/reservations/{RID}", query={}))
        assert asked["statusCode"] == 409, asked["body"]  # the fee may be taken: asked first, nothing changed
        cancelled = cloud.api_request(api_event(None, method="DELETE", path=f"/reservations/{RID}"))
        assert cancelled["statusCode"] == 202, cancelled["body"]
        cloud.run_until_idle()

        # Then nothing was bought, the reservation stays cancelled, and the team's month holds nothing for it
        assert _ours(cloud) == []
        assert states(cloud, RID)[-1] == "CANCELLED"
        assert _team_spent(cloud, month) == 0
        assert cloud.billable_resources() == []
