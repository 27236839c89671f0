"""template.yaml for the API door: every route the code serves, the listing index, scoped scheduler IAM."""

from __future__ import annotations

import json
from typing import Any

from scripts.export_openapi import generate
from tests.test_template import _template


def _statements(function: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        statement
        for policy in function["Properties"]["Policies"]
        if isinstance(policy, dict) and "Statement" in policy
        for statement in policy["Statement"]
    ]


def test_every_openapi_route_is_an_api_event_of_the_api_function() -> None:
    events = _template()["Resources"]["ApiFunction"]["Properties"]["Events"].values()
    routed = {(e["Properties"]["Method"].upper(), e["Properties"]["Path"]) for e in events}
    documented = {
        (method.upper(), path) for path, item in json.loads(generate())["paths"].items() for method in item
    }
    assert routed == documented


def test_ledger_has_the_sparse_listing_index() -> None:
    ledger = _template()["Resources"]["LedgerTable"]["Properties"]
    (index,) = ledger["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "listing"
    assert [k["AttributeName"] for k in index["KeySchema"]] == ["listing", "written_at"]


def test_schedule_permissions_are_scoped_to_the_request_group_and_role() -> None:
    resources = _template()["Resources"]
    statements = _statements(resources["ApiFunction"])
    by_action: dict[str, dict[str, Any]] = {}
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            by_action[action] = statement
    for action in ("scheduler:CreateSchedule", "scheduler:GetSchedule", "scheduler:DeleteSchedule"):
        assert by_action[action]["Resource"] == {
            "Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/"
            "${RequestScheduleGroup}/*"
        }
    pass_role = by_action["iam:PassRole"]
    assert pass_role["Resource"] == {"GetAtt": "RequestSchedulerRole.Arn"}
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}
    role = resources["RequestSchedulerRole"]["Properties"]
    (allowed,) = role["Policies"][0]["PolicyDocument"]["Statement"]
    assert allowed["Action"] == "lambda:InvokeFunction"
    assert allowed["Resource"] == {"GetAtt": "ScheduledRequestFunction.Arn"}
    env = resources["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert env["REQUEST_SCHEDULE_GROUP"] == {"Ref": "RequestScheduleGroup"}
    assert env["SCHEDULED_REQUEST_FUNCTION_ARN"] == {"GetAtt": "ScheduledRequestFunction.Arn"}
