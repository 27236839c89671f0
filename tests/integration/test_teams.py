"""Teams, four-eyes and cancels with eyes open (issue 16), through the local cloud with the template's
PolicyTable seeded from deploy/policy-seed.json (teams ml-platform and ml-eval)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.support import (
    APPROVER,
    REQUESTER,
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    states,
    training_plans,
)

pytestmark = pytest.mark.integration

EVAL_MEMBER = "arn:aws:sts::123456789012:assumed-role/MlEval/erin"


def _call(cloud: Any, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    answer = cloud.api_request(event)
    return int(answer["statusCode"]), json.loads(answer["body"]) if answer.get("body") else {}


def test_a_request_above_what_its_team_allows_is_rejected_with_the_reason_and_buys_nothing() -> None:
    with make_cloud() as cloud:
        status, _ = _call(cloud, api_event(base_request(), caller=EVAL_MEMBER))
        assert status == 202
        cloud.run_until_idle()
        assert states(cloud, "eval-week-49")[-1] == "REJECTED"
        rejected = [i for i in ledger_items(cloud, "eval-week-49") if i.get("state") == "REJECTED"]
        reason = rejected[0]["detail"]["reason"]
        assert rejected[0]["detail"]["error"] == "TeamLimitExceeded"
        assert "team ml-eval may not reserve in us-west-2, us-east-2" in reason
        assert "above team ml-eval's monthly budget $5,000.00" in reason
        assert training_plans(cloud) == []
        submitted = next(i for i in ledger_items(cloud, "eval-week-49") if i["sk"] == "SUBMITTED")
        assert (submitted["requester"], submitted["team"]) == (EVAL_MEMBER, "ml-eval")


def test_a_stranger_is_refused_at_the_door() -> None:
    with make_cloud() as cloud:
        status, body = _call(
            cloud, api_event(base_request(), caller="arn:aws:sts::123456789012:assumed-role/X/y")
        )
        assert status == 403
        assert "is not a member of any team" in body["message"]


def test_self_approval_is_refused_and_recorded_then_an_approver_approves_and_a_paid_cancel_asks_first() -> (
    None
):
    body = {**base_request(), "approval_above_usd": "1000", "requester": "cfo@example.com"}
    path = "/reservations/eval-week-49/approval"
    with make_cloud() as cloud:
        assert _call(cloud, api_event(body))[0] == 202
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, "eval-week-49"))
        status, answer = _call(cloud, api_event({"approved": True}, path=path, caller=REQUESTER))
        assert status == 403
        assert "cannot approve or reject it" in answer["message"]
        status, answer = _call(cloud, api_event({"approved": True, "approver": "cfo@example.com"}, path=path))
        assert status == 403  # the body never names the approver
        refusals = [i for i in ledger_items(cloud, "eval-week-49") if i["sk"].startswith("APPROVAL_REFUSED#")]
        assert [r["identity"] for r in refusals] == [REQUESTER, REQUESTER]
        status, answer = _call(cloud, api_event({"approved": True}, path=path, caller=APPROVER))
        assert (status, answer["approver"]) == (200, APPROVER)
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "eval-week-49"))
        items = {i["sk"]: i for i in ledger_items(cloud, "eval-week-49")}
        assert items["APPROVAL_DECISION"]["approver"] == APPROVER
        assert items["REQUEST"]["request"]["requester"] == REQUESTER  # not the body's cfo@example.com

        cancel = "/reservations/eval-week-49"
        status, answer = _call(cloud, api_event(None, method="DELETE", path=cancel, query={}))
        fee = items["PURCHASE"]["upfront_fee_usd"]
        assert status == 409
        assert (answer["upfront_fee_usd"], answer["refunded_usd"], answer["saves_usd"]) == (fee, "0", "0")
        assert "confirm=true" in answer["message"]
        assert "CANCELLED" not in states(cloud, "eval-week-49")
        status, answer = _call(
            cloud, api_event(None, method="DELETE", path=cancel, query={"confirm": "true"})
        )
        assert (status, answer["status"]) == (202, "CANCELLED")


def test_the_dry_run_reports_what_the_callers_team_refuses_as_the_workflow_then_rejects_it() -> None:
    body = {**base_request(), "instance_type": "ml.p4d.24xlarge", "regions": ["us-east-1", "us-west-2"]}
    with make_cloud() as cloud:
        status, plan = _call(cloud, api_event(body, path="/plans", caller=EVAL_MEMBER))
        assert status == 200
        team = plan["team"]
        assert team["team"] == "ml-eval"
        assert team["problems"] == [
            "team ml-eval may not reserve ml.p4d.24xlarge: its types are ml.p5.48xlarge",
            "team ml-eval may not reserve in us-west-2: its regions are us-east-1",
            "2 x ml.p4d.24xlarge is above team ml-eval's quota of 0 ml.p4d instances at once",
            "max_upfront_fee_usd $12,000.00 is above team ml-eval's monthly budget $5,000.00",
        ]
        assert team["left"] == "team ml-eval has $5,000.00 left in November 2026"
        assert team["left_usd"] == "5000"
        assert team["approval_above_usd"] == "1000"  # the team's, lower than the request's 6000
        assert plan["decision"] == "REJECTED"
        assert plan["reason"].startswith(team["refusal"] + ": nothing was bought.")

        # The same body from a member of ml-platform: its team allows it (what differs is the team).
        status, other = _call(cloud, api_event(body, path="/plans"))
        assert status == 200
        assert (other["team"]["team"], other["team"]["problems"], other["team"]["refusal"]) == (
            "ml-platform",
            [],
            None,
        )
        assert other["decision"] == "DRY_RUN"

        # Submitted, the workflow rejects it with the reasons the dry run gave (one rule).
        assert _call(cloud, api_event(body, caller=EVAL_MEMBER))[0] == 202
        cloud.run_until_idle()
        rejected = [i for i in ledger_items(cloud, "eval-week-49") if i.get("state") == "REJECTED"]
        assert rejected[0]["detail"]["reason"].startswith(team["refusal"] + ": nothing was bought.")
        assert training_plans(cloud) == []


def test_the_dry_run_refuses_a_caller_in_no_team() -> None:
    with make_cloud() as cloud:
        stranger = "arn:aws:sts::123456789012:assumed-role/X/y"
        status, body = _call(cloud, api_event(base_request(), path="/plans", caller=stranger))
        assert status == 403
        assert "is not a member of any team" in body["message"]
