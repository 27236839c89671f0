"""Slack user groups as a team's members and approvers (issue 16), on the local cloud: the local Slack
answers ``usergroups.users.list`` from ``local_values.json``'s ``Slack.UserGroups`` (S0EVALTEAM: U0EVAL2,
U0EVAL3; S0EVALLEADS: U0LEAD) and refuses it without the ``usergroups:read`` scope of the app manifest."""

from __future__ import annotations

import json
from typing import Any

import pytest

from events.slack_signed_request import command_body, interaction_body, local_secret, proxy_event
from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector
from tests.integration.support import (
    APPROVER,
    REGIONS,
    REQUESTER,
    START,
    TEMPLATE,
    api_event,
    base_request,
    ledger_items,
    states,
)

pytestmark = pytest.mark.integration

ADMIN = "arn:aws:sts::123456789012:assumed-role/PlatformAdmins/ada"
EVAL_BY_GROUPS: dict[str, Any] = {
    "members": {"slack_user_groups": ["S0EVALTEAM"]},
    "approvers": {"slack_user_groups": ["S0EVALLEADS"]},
    "monthly_budget_usd": "5000",
    "approval_above_usd": "1000",
    "instance_types": ["ml.p5.48xlarge"],
    "regions": ["us-east-1"],
    "instance_quota": {"ml.p5": 2},
}
RESERVE = "reserve 2 ml.p5.48xlarge 3d from 2026-12-06 until 2026-12-13 models=llama-eu max=4000 id={id}"


def _cloud() -> LocalCloud:
    return LocalCloud(
        TEMPLATE,
        start=START,
        seed=7,
        faults=FaultInjector(),
        # U0APPROVER and U0LEAD may press buttons at all; the team decides which of them approve its requests
        parameter_overrides={"SlackChannelId": "C0TESTS", "SlackApproverIds": "U0APPROVER,U0LEAD"},
    )


def _slack(cloud: LocalCloud, path: str, body: str) -> dict[str, Any]:
    event = proxy_event(path, body, secret=local_secret(), timestamp=int(cloud.now().timestamp()))
    answer = cloud.api_request(event)
    assert answer["statusCode"] == 200, answer
    return json.loads(answer["body"]) if answer.get("body") else {}


def _press(cloud: LocalCloud, request_id: str, user: str) -> str:
    """``user`` presses Approve; the text Slack shows them (through the response_url)."""
    _slack(cloud, "/slack/interactions", interaction_body(request_id, approve=True, user_id=user))
    return cloud.outbox.messages[-1].text


def test_slack_user_groups_are_members_and_approvers_as_slack_says_now() -> None:
    with _cloud() as cloud:
        for region in REGIONS:
            cloud.client("sagemaker", region).create_model(
                ModelName="llama-eu",
                ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
                PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/tgi:latest"},
            )
        put = cloud.api_request(
            api_event(EVAL_BY_GROUPS, method="PUT", path="/admin/teams/ml-eval", caller=ADMIN)
        )
        assert put["statusCode"] == 200

        refused = _slack(cloud, "/slack/commands", command_body(RESERVE.format(id="g-0"), user_id="U0NOBODY"))
        assert "slack:U0NOBODY is not a member of any team" in refused["text"]
        answer = _slack(cloud, "/slack/commands", command_body(RESERVE.format(id="g-1"), user_id="U0EVAL2"))
        assert "Reservation `g-1` requested" in answer["text"], answer
        lookups = [m for m in cloud.outbox.messages if m.kind == "usergroups.users.list"]
        assert [m.payload["usergroup"] for m in lookups] == ["S0EVALTEAM", "S0EVALTEAM"]

        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, "g-1"))  # $1,990.60 > $1,000
        request = next(i for i in ledger_items(cloud, "g-1") if i["sk"] == "REQUEST")["request"]
        assert (request["requester"], request["team"]) == ("slack:U0EVAL2", "ml-eval")
        # U0APPROVER may press buttons and approves ml-eval in the seed, but the team's approvers are now
        # the users of S0EVALLEADS: refused, and nothing changes.
        assert "slack:U0APPROVER is not an approver of team ml-eval" in _press(cloud, "g-1", "U0APPROVER")
        assert states(cloud, "g-1")[-1] == "AWAITING_APPROVAL"
        assert "Approved by <@U0LEAD>" in _press(cloud, "g-1", "U0LEAD")
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "g-1"))
        decision = next(i for i in ledger_items(cloud, "g-1") if i["sk"] == "APPROVAL_DECISION")
        assert decision["approver"] == "slack:U0LEAD"

        # Installed without usergroups:read, Slack refuses the lookup: the user is told what to fix.
        cloud.outbox.scopes = frozenset({"chat:write", "commands"})
        answer = _slack(cloud, "/slack/commands", command_body(RESERVE.format(id="g-2"), user_id="U0EVAL3"))
        assert "This deployment is misconfigured" in answer["text"]
        assert "missing_scope" in answer["text"]
        assert "usergroups:read" in answer["text"]
        assert states(cloud, "g-2") == []


def test_one_person_who_asked_at_the_api_never_approves_from_slack() -> None:
    """The four-eyes rule compares people (the policy's ``people``, set by ``PUT /admin/people``): the IAM
    requester's own Slack user may press every button, yet not approve its request; another approver may."""
    pat = {"name": "pat", "iam_principal_arns": [REQUESTER], "slack_users": ["U0APPROVER"]}
    with _cloud() as cloud:
        both = {"people": [pat, {**pat, "name": "pat-again", "iam_principal_arns": []}]}
        refused = cloud.api_request(api_event(both, method="PUT", path="/admin/people", caller=ADMIN))
        assert refused["statusCode"] == 422  # valid people, but slack:U0APPROVER named for two of them
        assert "slack:U0APPROVER is named for both pat and pat-again" in refused["body"]
        put = cloud.api_request(
            api_event({"people": [pat]}, method="PUT", path="/admin/people", caller=ADMIN)
        )
        assert (put["statusCode"], json.loads(put["body"])["people"][0]["name"]) == (200, "pat")

        request = {**base_request(), "approval_above_usd": "100"}
        assert cloud.api_request(api_event(request, caller=REQUESTER))["statusCode"] == 202
        rid = request["request_id"]
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, rid))
        told = _press(cloud, rid, "U0APPROVER")
        assert f"slack:U0APPROVER (the same person as {REQUESTER}) requested this reservation" in told
        assert states(cloud, rid)[-1] == "AWAITING_APPROVAL"
        refusal = next(i for i in ledger_items(cloud, rid) if str(i["sk"]).startswith("APPROVAL_REFUSED#"))
        assert refusal["identity"] == "slack:U0APPROVER"

        path = f"/reservations/{rid}/approval"
        approved = cloud.api_request(api_event({"approved": True}, path=path, caller=APPROVER))
        assert approved["statusCode"] == 200, approved
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, rid))
