"""template.yaml for the Slack door: unauthenticated routes (Slack signs), its own secret, least privilege."""

from __future__ import annotations

from typing import Any

from tests.test_template import _template


def _resources() -> dict[str, Any]:
    resources: dict[str, Any] = _template()["Resources"]
    return resources


def test_the_slack_routes_skip_iam_auth_and_reach_the_slack_function() -> None:
    function = _resources()["SlackFunction"]["Properties"]
    routes = {
        (e["Properties"]["Path"], e["Properties"]["Method"]): e["Properties"]
        for e in function["Events"].values()
    }
    assert set(routes) == {("/slack/commands", "post"), ("/slack/interactions", "post")}
    assert all(props["Auth"] == {"Authorizer": "NONE"} for props in routes.values())
    assert all(props["RestApiId"] == {"Ref": "CapacityApi"} for props in routes.values())


def test_the_slack_function_reads_only_its_two_secrets_and_knows_its_approvers() -> None:
    function = _resources()["SlackFunction"]["Properties"]
    env = function["Environment"]["Variables"]
    assert env["SLACK_SIGNING_SECRET_ARN"] == {"Ref": "SlackSigningSecret"}
    assert env["SLACK_APPROVER_IDS"] == {"Ref": "SlackApproverIds"}
    secrets = [
        p["AWSSecretsManagerGetSecretValuePolicy"]
        for p in function["Policies"]
        if "AWSSecretsManagerGetSecretValuePolicy" in p
    ]
    # The signing secret verifies requests; the bot token reads the Slack user groups a team names
    # (usergroups.users.list, issue 16) and nothing else in this function.
    assert secrets == [
        {"SecretArn": {"Ref": "SlackSigningSecret"}},
        {"SecretArn": {"Ref": "SlackBotTokenSecret"}},
    ]
    statements = [s for p in function["Policies"] if "Statement" in p for s in p["Statement"]]
    put = next(s for s in statements if s["Action"] == "dynamodb:PutItem")
    assert put["Resource"] == {"GetAtt": "IdempotencyTable.Arn"}
    answer = next(s for s in statements if "states:SendTaskSuccess" in s["Action"])
    assert answer["Resource"] == "*"  # no resource type in the Service Authorization Reference
    assert _resources()["SlackSigningSecret"]["Type"] == "AWS::SecretsManager::Secret"
