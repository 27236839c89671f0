"""Keep looking until a deadline (issue 17 item 4) on the local cloud, whose market lists capacity from a
later virtual instant (``MarketConfig.listed_from``) or never (``capacity`` 0):

- no offering today, one from day 3: bought at the first look after it appeared (a look every
  ``search_every_minutes``, default 15), within the window and the
  rules (budget; an approval when above the threshold), on both platforms;
- none until the deadline: the requester is told at the deadline (FAILED ``SearchDeadlinePassed``, the Slack
  decision, ``ReservationFailed`` on the operations topic), nothing is bought;
- a look that finds nothing costs the same handful of state transitions, for a day or ten of looking
  (``GetExecutionHistory``'s ``*StateEntered``, as bench section 1 counts them);
- a cancel during a wait ends the looking at once: the reserve execution stops within minutes, nothing is
  bought, even when capacity appears later.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.record_kinds import STATE_PREFIX
from capacity.search_schedule import look_instants

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from tests.integration.support import (
    APPROVER,
    LIFECYCLE,
    START,
    TEMPLATE,
    api_event,
    base_request,
    in_order,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
    training_plans,
)
from tests.integration.test_ec2_capacity_blocks import blocks, create_launch_templates, ec2_request
from tests.integration.test_operations_notices import _inbox, _subscribe

pytestmark = pytest.mark.integration

RID = "eval-week-49"
"""The demo request's id: 2 x ml.p5.48xlarge for 72 h between 2026-12-06 and 2026-12-13 (latest start
2026-12-10T00:00Z), budget $12,000, approval above $6,000."""
APPEARS = START + timedelta(days=3)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _looking(search_until: datetime, **extra: Any) -> dict[str, Any]:
    return {**base_request(), "search_until": _iso(search_until), **extra}


def _entries(cloud: LocalCloud, request_id: str, state: str) -> list[dict[str, Any]]:
    items = ledger_items(cloud, request_id)
    return [i for i in items if i["sk"].startswith(STATE_PREFIX) and i["state"] == state]


def _at(entry: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(entry["at"]).replace("Z", "+00:00"))


def _reserve_execution(cloud: LocalCloud) -> Any:
    (execution,) = [e for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")]
    return execution


def _looks(cloud: LocalCloud, request_id: str) -> list[datetime]:
    """Every look of the request's schedule after the first: from the first SEARCHING's ``since``,
    ``search_until`` and ``every_minutes`` (SEARCHING is recorded only when the answer changes)."""
    first = _entries(cloud, request_id, "SEARCHING")[0]["detail"]
    since, until = (
        datetime.fromisoformat(str(first[k]).replace("Z", "+00:00")) for k in ("since", "search_until")
    )
    return look_instants(since, until, int(first["every_minutes"]))


def _first_look_after(cloud: LocalCloud, request_id: str, moment: datetime) -> datetime:
    """The first look of the request's schedule at or after ``moment``."""
    return next(look for look in _looks(cloud, request_id) if look >= moment)


def test_an_offering_that_appears_on_day_3_is_bought_then_within_the_window_and_the_rules() -> None:
    market = MarketConfig(listed_from={"*/ml.p5.48xlarge": APPEARS})
    with make_cloud(market=market) as cloud:
        response = post_reservation(cloud, _looking(START + timedelta(days=8)))
        assert response["statusCode"] == 202, response["json"]
        cloud.run_until_idle()

        seen = states(cloud, RID)
        assert seen[:2] == ["REQUESTED", "SEARCHING"], seen
        assert in_order(seen, LIFECYCLE), seen
        assert "FAILED" not in seen, seen
        assert "REJECTED" not in seen, seen
        (purchased,) = _entries(cloud, RID, "PURCHASED")
        # Bought at the first look after the capacity appeared, not before and not a look later.
        assert _at(purchased) >= APPEARS
        assert _at(purchased) - _first_look_after(cloud, RID, APPEARS) < timedelta(minutes=15)
        # No look found anything before day 3: every SEARCHING look is before the capacity appeared.
        assert all(_at(e) < APPEARS for e in _entries(cloud, RID, "SEARCHING"))
        (plan,) = training_plans(cloud)
        assert datetime(2026, 12, 6, tzinfo=plan["StartTime"].tzinfo) <= plan["StartTime"]
        assert plan["EndTime"] <= datetime(2026, 12, 13, tzinfo=plan["EndTime"].tzinfo)
        assert Decimal(str(purchased["money_usd"])) <= Decimal("6000")  # within budget, no approval needed
        assert cloud.billable_resources() == []
        assert "Still looking for eval-week-49" in slack_texts(cloud)


def test_an_offering_found_on_a_later_look_above_the_threshold_waits_for_an_approver() -> None:
    market = MarketConfig(listed_from={"*/ml.p5.48xlarge": APPEARS})
    with make_cloud(market=market) as cloud:
        # hourly looks: the claim is the approval at a later look, not the pace (four times fewer looks)
        body = _looking(START + timedelta(days=8), approval_above_usd="1000", search_every_minutes=60)
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, RID))
        assert _at(_entries(cloud, RID, "AWAITING_APPROVAL")[0]) >= APPEARS
        assert training_plans(cloud) == []  # nothing bought before a person approves
        decided = cloud.api_request(
            api_event({"approved": True}, path=f"/reservations/{RID}/approval", caller=APPROVER)
        )
        assert decided["statusCode"] == 200, decided["body"]
        cloud.run_until_idle()
        seen = states(cloud, RID)
        assert in_order(seen, ["SEARCHING", "PLANNED", "AWAITING_APPROVAL", "PURCHASED", "RELEASED"]), seen
        assert len(training_plans(cloud)) == 1


def test_nothing_until_the_deadline_tells_the_requester_at_the_deadline() -> None:
    deadline = START + timedelta(days=2)
    with LocalCloud(
        TEMPLATE,
        start=START,
        market=MarketConfig(capacity={"*": 0}),
        parameter_overrides={"SlackChannelId": "C0TESTS"},
    ) as cloud:
        topic, queue = _subscribe(cloud)
        assert post_reservation(cloud, _looking(deadline))["statusCode"] == 202
        cloud.run_until_idle()

        seen = states(cloud, RID)
        assert seen == ["REQUESTED", "SEARCHING", "FAILED"], seen  # SEARCHING once: the answer never changed
        (failed,) = _entries(cloud, RID, "FAILED")
        looks = 1 + len(_looks(cloud, RID))  # 2 days of 15-minute looks: 193
        assert looks == 2 * 24 * 4 + 1
        assert f"Looked {looks} times from" in failed["detail"]["reason"]
        assert deadline <= _at(failed) < deadline + timedelta(minutes=15)  # at the deadline, not before
        assert failed["detail"]["error"] == "SearchDeadlinePassed"
        assert "until the deadline 2026-12-01T12:00:00Z (search_until)" in failed["detail"]["reason"]
        assert training_plans(cloud) == []
        assert "Decision for eval-week-49: NO_OFFERING" in slack_texts(cloud)
        notices = [n for n in _inbox(cloud, queue) if "eval-week-49" in n]
        assert any("SearchDeadlinePassed" in n for n in notices), notices
        assert any(d.target_arn == topic for d in cloud.delivery.deliveries)


@pytest.mark.parametrize(("days", "every"), [(1, 15), (10, 120), (30, 360)])
def test_capacity_appearing_late_in_a_look_of_days_is_bought_within_one_interval(
    days: int, every: int
) -> None:
    """Issue 31 point 4: looks of 1, 10 and 30 days (at 15 minutes, 2 and 6 hours: the test's running time),
    capacity listed 5 h 7 min before the deadline (off the looks' grid): bought at most one
    ``search_every_minutes`` after it appeared (plus the purchase's own minutes), in one execution."""
    deadline = START + timedelta(days=days)
    appears = deadline - timedelta(hours=5, minutes=7)
    body = {
        **base_request(),
        "earliest_start": _iso(deadline + timedelta(days=1)),
        "latest_end": _iso(deadline + timedelta(days=8)),
        "search_until": _iso(deadline),
        "search_every_minutes": every,
    }
    with make_cloud(market=MarketConfig(listed_from={"*/ml.p5.48xlarge": appears})) as cloud:
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))

        (purchased,) = _entries(cloud, RID, "PURCHASED")
        waited = _at(purchased) - appears
        assert timedelta(0) <= waited <= timedelta(minutes=every + 2), waited
        assert all(_at(e) < appears for e in _entries(cloud, RID, "SEARCHING"))  # nothing seen before
        assert len(_looks(cloud, RID)) == -(-days * 24 * 60 // every)  # the schedule the request asked for


def _transitions_looking_for(days: int) -> tuple[int, int]:
    """``(looks, state transitions)`` of a request that looks every 3 hours for ``days`` and finds nothing."""
    with make_cloud(market=MarketConfig(capacity={"*": 0})) as cloud:
        body = _looking(START + timedelta(days=days), search_every_minutes=180)
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run_until_idle()
        assert states(cloud, RID)[-1] == "FAILED"
        execution = _reserve_execution(cloud)
        with cloud.dispatcher.exempt():
            history = cloud.client("stepfunctions").get_execution_history(
                executionArn=execution.arn, maxResults=1000
            )
        entered = [e for e in history["events"] if e["type"].endswith("StateEntered")]
        assert len(entered) == execution.transitions
        return 1 + len(_looks(cloud, RID)), int(execution.transitions)


def test_a_look_that_finds_nothing_costs_the_same_few_transitions_for_a_day_or_ten() -> None:
    (looks_one, one), (looks_ten, ten) = _transitions_looking_for(1), _transitions_looking_for(10)
    assert (looks_one, looks_ten) == (9, 81)  # every 3 hours, the last at the deadline
    per_look, rest = divmod(ten - one, looks_ten - looks_one)
    assert rest == 0, (one, ten)  # each look the same transitions, whatever its wait lasts
    assert 0 < per_look <= 20, per_look  # a handful: $0.025 per 1,000 transitions


def test_a_cancel_during_the_wait_ends_the_looking_at_once_and_buys_nothing() -> None:
    market = MarketConfig(listed_from={"*/ml.p5.48xlarge": APPEARS})
    with make_cloud(market=market) as cloud:
        assert post_reservation(cloud, _looking(START + timedelta(days=8)))["statusCode"] == 202
        cloud.run(stop_when=lambda: len(_entries(cloud, RID, "SEARCHING")) >= 1)
        cloud.run(until=cloud.now() + timedelta(hours=2, minutes=10))  # eight looks later, in a wait
        cancelled_at = cloud.now()
        answer = cloud.api_request(api_event(None, method="DELETE", path=f"/reservations/{RID}"))
        assert answer["statusCode"] == 202, answer["body"]
        cloud.run_until_idle()  # capacity appears on day 3: nobody looks any more

        execution = _reserve_execution(cloud)
        assert execution.status == "SUCCEEDED"  # a cancel is not a failure (the Stopped state)
        assert execution.stop is not None
        assert execution.stop - cancelled_at < timedelta(minutes=5)  # not at the next look, hours later
        seen = states(cloud, RID)
        assert seen[-1] == "CANCELLED" or in_order(seen, ["CANCELLED", "RELEASED"]), seen
        assert "PLANNED" not in seen, seen
        assert "PURCHASED" not in seen, seen
        assert training_plans(cloud) == []
        assert cloud.billable_resources() == []


def test_plans_say_when_the_workflow_would_look_next() -> None:
    with make_cloud(market=MarketConfig(listed_from={"*/ml.p5.48xlarge": APPEARS})) as cloud:
        body = _looking(START + timedelta(days=8), search_every_minutes=180)
        answer = cloud.api_request(api_event(body, path="/plans"))
        assert answer["statusCode"] == 200, answer["body"]
        plan = json.loads(answer["body"])
        assert plan["decision"] == "NO_OFFERING"
        assert plan["next_look_at"] == _iso(START + timedelta(hours=3))
        assert states(cloud, RID) == []  # a dry run records nothing


def test_ec2_a_capacity_block_that_appears_later_is_bought_then_and_released() -> None:
    market = MarketConfig(listed_from={"*/p5.48xlarge": START + timedelta(days=2)})
    request_id = "train-week-49-ec2"
    with make_cloud(market=market) as cloud:
        create_launch_templates(cloud)
        body = {**ec2_request(), "search_until": _iso(START + timedelta(days=8)), "search_every_minutes": 60}
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run_until_idle()

        seen = states(cloud, request_id)
        assert seen[:2] == ["REQUESTED", "SEARCHING"], seen
        assert in_order(seen, LIFECYCLE), seen
        (purchased,) = _entries(cloud, request_id, "PURCHASED")
        appeared = START + timedelta(days=2)
        assert _at(purchased) >= appeared
        assert _at(purchased) - _first_look_after(cloud, request_id, appeared) < timedelta(minutes=15)
        bought = [b for b in blocks(cloud) if b["State"] not in ("payment-failed", "failed")]
        assert len(bought) == 1
        assert datetime(2026, 12, 6, tzinfo=bought[0]["StartDate"].tzinfo) <= bought[0]["StartDate"]
        assert Decimal(str(purchased["money_usd"])) <= Decimal("12000")
        assert cloud.billable_resources() == []
