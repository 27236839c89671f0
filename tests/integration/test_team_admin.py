"""The administrators' side of issue 16 through the local cloud's API: the admin routes set teams and the
account cap (validated at the door, never half-applied) and the limits they set are what the next request is
judged by; members and approvers chosen by IAM principal tag, read from the local cloud's IAM
(``ListRoleTags``) each time."""

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

ADMIN = "arn:aws:sts::123456789012:assumed-role/PlatformAdmins/ada"
RESEARCHER = "arn:aws:sts::123456789012:assumed-role/MlResearch/rita"
RESEARCH_TEAM: dict[str, Any] = {
    "description": "a research team an administrator adds",
    "members": {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/MlResearch/*"]},
    "approvers": {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/Approvers/*"]},
    "monthly_budget_usd": "3000",
    "approval_above_usd": "2500",
    "instance_types": ["ml.p5.48xlarge"],
    "regions": ["us-east-1"],
    "instance_quota": {"ml.p5": 1},
}


def _call(cloud: Any, body: Any, method: str, path: str, caller: str = ADMIN) -> tuple[int, dict[str, Any]]:
    answer = cloud.api_request(api_event(body, method=method, path=path, caller=caller))
    return int(answer["statusCode"]), json.loads(answer["body"]) if answer.get("body") else {}


def _request(**overrides: Any) -> dict[str, Any]:
    """The demo's request without its approval threshold (the team's applies), with ``overrides``."""
    body = {key: value for key, value in base_request().items() if key != "approval_above_usd"}
    return {**body, **overrides}


def _fields(body: dict[str, Any]) -> dict[str, str]:
    return {error["field"]: error["message"] for error in body["errors"]}


def _invalid_bodies_are_refused_and_change_nothing(cloud: Any, path: str, view: dict[str, Any]) -> None:
    """400 naming each field (422 for a name that is not the path's); the team stays as ``view``."""
    status, errors = _call(
        cloud,
        {
            **RESEARCH_TEAM,
            "instance_types": ["ml.p9.huge"],
            "members": {"iam_principal_arns": ["alice@example.com"]},
            "monthly_budget_usd": "1000",
            "approval_above_usd": "2500",
        },
        "PUT",
        path,
    )
    assert status == 400
    problems = _fields(errors)
    assert set(problems) == {"instance_types", "members.iam_principal_arns.0", "approval_above_usd"}
    assert "unknown instance type(s) 'ml.p9.huge'" in problems["instance_types"]
    assert "above monthly_budget_usd 1000: it would never apply" in problems["approval_above_usd"]
    status, errors = _call(cloud, {**RESEARCH_TEAM, "approvers": {}}, "PUT", path)
    assert (status, list(_fields(errors))) == (400, ["approvers"])
    status, errors = _call(cloud, {**RESEARCH_TEAM, "name": "ml-other"}, "PUT", path)
    assert (status, list(_fields(errors))) == (422, ["name"])
    assert _call(cloud, RESEARCH_TEAM, "PUT", "/admin/teams/ML_Research")[0] == 400
    assert _call(cloud, None, "GET", path) == (200, view)  # unchanged


def test_admins_set_a_team_and_the_cap_through_the_api_and_the_next_request_is_judged_by_them() -> None:
    path = "/admin/teams/ml-research"
    request = _request(regions=["us-east-1", "us-west-2"], max_upfront_fee_usd="2900")
    with make_cloud() as cloud:
        assert _call(cloud, request, "POST", "/reservations", caller=RESEARCHER)[0] == 403  # in no team yet

        status, view = _call(cloud, RESEARCH_TEAM, "PUT", path)  # no name in the body: the path's
        assert status == 200
        assert view["team"]["name"] == "ml-research"
        assert (view["team"]["monthly_budget_usd"], view["team"]["regions"]) == ("3000", ["us-east-1"])
        assert (view["month"], view["spent_usd"], view["left_usd"]) == ("2026-11", "0", "3000")
        assert view["instances_held"] == {"ml.p5": 0}
        assert _call(cloud, None, "GET", path) == (200, view)

        _invalid_bodies_are_refused_and_change_nothing(cloud, path, view)

        status, listed = _call(cloud, None, "GET", "/admin/teams")
        assert status == 200
        assert [t["team"]["name"] for t in listed["teams"]] == ["ml-eval", "ml-platform", "ml-research"]
        assert listed["account"] == {"monthly_cap_usd": "5000000"}  # deploy/policy-seed.json's

        status, errors = _call(cloud, {"monthly_cap_usd": "-1"}, "PUT", "/admin/account")
        assert (status, list(_fields(errors))) == (400, ["monthly_cap_usd"])
        status, errors = _call(cloud, {"monthly_cap_usd": "2500", "currency": "EUR"}, "PUT", "/admin/account")
        assert (status, list(_fields(errors))) == (400, ["currency"])
        status, account = _call(cloud, {"monthly_cap_usd": "2500"}, "PUT", "/admin/account")
        assert (status, account) == (200, {"monthly_cap_usd": "2500", "month": "2026-11", "spent_usd": "0"})
        assert _call(cloud, None, "GET", "/admin/teams")[1]["account"] == {"monthly_cap_usd": "2500"}

        # The researcher may request now, and the request is judged by what the admin set.
        assert _call(cloud, request, "POST", "/reservations", caller=RESEARCHER)[0] == 202
        cloud.run_until_idle()
        assert states(cloud, "eval-week-49")[-1] == "REJECTED"
        rejected = next(i for i in ledger_items(cloud, "eval-week-49") if i.get("state") == "REJECTED")
        reason = rejected["detail"]["reason"]
        assert rejected["detail"]["error"] == "TeamLimitExceeded"
        assert "team ml-research may not reserve in us-west-2: its regions are us-east-1" in reason
        assert "2 x ml.p5.48xlarge is above team ml-research's quota of 1 ml.p5 instances at once" in reason
        assert "max_upfront_fee_usd $2,900.00 is above the account's monthly cap $2,500.00" in reason
        assert training_plans(cloud) == []

        assert _call(cloud, None, "DELETE", path) == (200, {"name": "ml-research", "deleted": True})
        assert _call(cloud, None, "GET", path)[0] == 404
        assert _call(cloud, None, "DELETE", path)[0] == 404
        again = {**request, "request_id": "eval-week-50"}
        status, refused = _call(cloud, again, "POST", "/reservations", caller=RESEARCHER)
        assert status == 403
        assert "is not a member of any team" in refused["message"]


def _role(cloud: Any, name: str, tags: dict[str, str]) -> None:
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    cloud.client("iam").create_role(
        RoleName=name,
        AssumeRolePolicyDocument=json.dumps(trust),
        Tags=[{"Key": key, "Value": value} for key, value in tags.items()],
    )


def test_members_and_approvers_by_iam_principal_tag_are_read_from_iam_each_time() -> None:
    team = {
        **RESEARCH_TEAM,
        "members": {"iam_principal_tags": {"team": "ml-research"}},
        "approvers": {"iam_principal_tags": {"approves": "ml-research"}},
        "monthly_budget_usd": "5000",
        "approval_above_usd": "1000",
        "instance_quota": {"ml.p5": 2},
    }
    tagged = "arn:aws:sts::123456789012:assumed-role/Researchers/rita"
    lead = "arn:aws:sts::123456789012:assumed-role/ResearchLeads/lee"
    visitor = "arn:aws:sts::123456789012:assumed-role/Visitors/vic"
    request = _request(regions=["us-east-1"], max_upfront_fee_usd="3000")
    approval = "/reservations/eval-week-49/approval"
    with make_cloud() as cloud:
        _role(cloud, "Researchers", {"team": "ml-research", "cost-center": "42"})
        _role(cloud, "ResearchLeads", {"approves": "ml-research"})
        _role(cloud, "Visitors", {"team": "ml-visitors"})
        assert _call(cloud, team, "PUT", "/admin/teams/ml-research")[0] == 200

        for stranger in (visitor, "arn:aws:sts::123456789012:assumed-role/NoSuchRole/x"):
            status, body = _call(cloud, request, "POST", "/reservations", caller=stranger)
            assert (status, "is not a member of any team" in body["message"]) == (403, True)
        assert _call(cloud, request, "POST", "/reservations", caller=tagged)[0] == 202
        submitted = next(i for i in ledger_items(cloud, "eval-week-49") if i["sk"] == "SUBMITTED")
        assert (submitted["requester"], submitted["team"]) == (tagged, "ml-research")

        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, "eval-week-49"))
        status, body = _call(cloud, {"approved": True}, "POST", approval, caller=tagged)
        assert (status, "cannot approve or reject it" in body["message"]) == (403, True)
        for outsider in (visitor, APPROVER):  # APPROVER approves ml-platform and ml-eval, not ml-research
            status, body = _call(cloud, {"approved": True}, "POST", approval, caller=outsider)
            assert (status, body["message"]) == (404, "no reservation 'eval-week-49'")  # not theirs to see
        status, body = _call(cloud, {"approved": True}, "POST", approval, caller=lead)
        assert (status, body["approver"]) == (200, lead)
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "eval-week-49"))
        decision = next(i for i in ledger_items(cloud, "eval-week-49") if i["sk"] == "APPROVAL_DECISION")
        assert decision["approver"] == lead

        # Tags are read when asked, not remembered: untagged, the researcher is no member any more.
        cloud.client("iam").untag_role(RoleName="Researchers", TagKeys=["team"])
        again = {**request, "request_id": "eval-week-50"}
        assert _call(cloud, again, "POST", "/reservations", caller=tagged)[0] == 403


def test_admins_are_changed_through_the_api_without_seeding_again() -> None:
    """``PUT /admin/admins`` replaces who sees every team at once (the next read is judged by it); a
    requester's call is refused by IAM, an invalid body changes nothing."""
    seeded = {
        "iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/PlatformAdmins/*"],
        "iam_principal_tags": {},
        "slack_users": [],
        "slack_user_groups": [],
    }
    with make_cloud() as cloud:
        assert _call(cloud, base_request(), "POST", "/reservations", caller=REQUESTER)[0] == 202
        read = f"/reservations/{base_request()['request_id']}"
        assert _call(cloud, None, "GET", read, caller=RESEARCHER)[0] == 404  # another team's: unseen
        assert _call(cloud, None, "GET", "/admin/admins") == (200, seeded)  # deploy/policy-seed.json's

        assert (
            _call(cloud, {"iam_principal_arns": [RESEARCHER]}, "PUT", "/admin/admins", caller=RESEARCHER)[0]
            == 403
        )
        status, errors = _call(
            cloud, {"iam_principal_arns": ["not an arn"], "emails": []}, "PUT", "/admin/admins"
        )
        assert (status, sorted(_fields(errors))) == (400, ["emails", "iam_principal_arns.0"])
        assert _call(cloud, None, "GET", "/admin/admins") == (200, seeded)  # nothing half-applied

        wider = {"iam_principal_arns": [*seeded["iam_principal_arns"], RESEARCHER]}
        assert _call(cloud, wider, "PUT", "/admin/admins") == (200, {**seeded, **wider})
        status, shown = _call(cloud, None, "GET", read, caller=RESEARCHER)
        assert (status, shown["request"]["team"]) == (200, "ml-platform")  # an administrator now sees it
        assert _call(cloud, None, "DELETE", read, caller=RESEARCHER)[0] == 403  # sees, but may not cancel
